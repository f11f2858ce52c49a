"""`python -m bench --decode-split`: where a decode step of step 18's served graph goes, at 1, 4, 16 and 32 requests,
and a prefill of 1, 4 and 16 prompts of 512 tokens.

The graph is the one MAX's server runs (gpt2_arch's ServedFastGPT2 around solution 18's GPT2PagedQ8), on MAX's
own paged cache, each request a 32-token prompt and then a token a step. It is compiled four times: whole; with
every product (matmul_q8) replaced by a stand-in of its shape (x's first column, broadcast); with the
attention (paged_flash_attention) replaced too (q + k + v); and with every layer norm and GELU also taken out (x
as it came). Each version decodes its own requests, the four in alternating rounds; the differences of their
median steps are the products', the attention's and the norms' and GELUs' share, what the third takes is the rest
(the other graph ops, the calls between them, the step's fixed cost): what fusing the small ops into the products
could save at most is the norms' and GELUs' share.

The products' share is then taken apart (`product_calls`): chains of CALLS products at one row of x, of two
widths, give what a call costs beside the bytes of its weights, and the rate those bytes are read at.
"""

from __future__ import annotations

import json
import statistics
import time
from contextlib import ExitStack
from pathlib import Path
from unittest import mock

import numpy as np

from runtime.bandwidth import alternating_seconds, products
from runtime.files import MODEL_FILE
from runtime.kv_inputs import staged
from runtime.quantize import BLOCK, quantize
from runtime.server import PAGE  # the served cache's: every request's prompt and its steps fit in one

# MAX, gpt2_arch (MAX's serving stack) and the solutions are imported inside the functions that use them: importing
# them takes seconds.

STREAMS = (1, 4, 16, 32)
PROMPT = 32
PREFILLS, LONG_PROMPT = (1, 4, 16), 512  # prompts of LONG_PROMPT tokens in one prefill
CALLS, WIDTHS = 24, (1, 8)  # products a chain; the rows of their weights, [N, n_embd], N as n_embd times these
ROUNDS, STEPS = 4, 10  # alternating rounds of STEPS timed steps per version, after one untimed


def _stand_in_product(x, q, scales, bias=None):
    """matmul_q8's shape, none of its work: x [M, K] -> [M, N], x's first column."""
    from max.experimental import functional as F

    return F.broadcast_to(x[:, :1], [x.shape[0], q.shape[0]])


def _stand_in_attention(q, k, v, kv_collection, input_row_offsets, layer):
    return q + k + v


def _as_it_came(x, *args, **kwargs):
    """A GELU's shape, none of its work: x."""
    return x


def _compiled(folder: Path, config, kv_params, stand_ins: dict, plain_layers: bool = False):
    """ServedFastGPT2 around solution 18's GPT2PagedQ8 (solution 11's model loaded), compiled for ragged batches,
    with solution 18's functions named in `stand_ins` replaced while it is traced, and with `plain_layers` every
    layer norm and GELU taken out."""
    from max.experimental import functional as F
    from max.graph import DeviceRef
    from max.pipelines.lib.interfaces.batch_processor import modulev3_ragged_kv_symbolic_inputs
    from safetensors.numpy import load_file

    from gpt2_arch.model import ServedFastGPT2
    from solutions import solution_11, solution_18

    with F.lazy():
        lm = solution_11.GPT2LMHeadModel(config)
    solution_11.load_hf_weights(lm, load_file(folder / MODEL_FILE))
    with ExitStack() as patches:
        for name, stand_in in stand_ins.items():
            patches.enter_context(mock.patch.object(solution_18, name, stand_in))
        if plain_layers:
            patches.enter_context(mock.patch.object(solution_18.OneOpLayerNorm, "forward", lambda self, x: x))
            patches.enter_context(mock.patch.object(F, "gelu", _as_it_came))
        served = ServedFastGPT2(solution_18.GPT2PagedQ8(lm, kv_params), kv_params)
        return served.compile(*modulev3_ragged_kv_symbolic_inputs(kv_params=kv_params, device_refs=[DeviceRef.CPU()]))


class _Requests:
    """`streams` requests on `manager`'s pages, each a random prompt of PROMPT ids; step() runs one batch of them
    (each request's new tokens) through `graph`, feeds back each one's argmax and returns the seconds it took."""

    def __init__(self, graph, manager, streams: int, rng, prompt: int = PROMPT, vocab: int = 50000):
        from max.pipelines.context import TextContext, TokenBuffer
        from max.pipelines.modeling.types import RequestID

        self.graph, self.manager, self.contexts = graph, manager, []
        for _ in range(streams):
            ids = rng.integers(0, vocab, prompt).astype(np.int64)
            context = TextContext(request_id=RequestID(), max_length=prompt + PAGE, tokens=TokenBuffer(ids))
            manager.claim(context)
            self.contexts.append(context)

    def step(self) -> float:
        from max import tree
        from max.driver import Buffer

        for context in self.contexts:
            self.manager.alloc(context)
        ids = np.concatenate([c.tokens.active for c in self.contexts]).astype(np.int64)
        offsets = np.cumsum([0] + [len(c.tokens.active) for c in self.contexts]).astype(np.uint32)
        started = time.perf_counter()
        out = self.graph(Buffer.from_numpy(ids), Buffer.from_numpy(np.array([1], np.int64)),
                         Buffer.from_numpy(offsets), *tree.leaves(staged(self.manager, [self.contexts])))
        logits = np.from_dlpack(out.next_token_logits)  # [B, V]
        chosen = logits.argmax(-1)
        took = time.perf_counter() - started
        self.logits = logits  # the step's next-token scores (bench/again.py compares them)
        for context, token in zip(self.contexts, chosen):
            context.update(int(token))
            self.manager.step(context)
        return took

    def release(self) -> None:
        for context in self.contexts:
            self.manager.release(context)


def kv_params_for(config):
    """MAX's paged cache of the served graphs for `config`: float32, a head a KV head, pages of PAGE."""
    from max.dtype import DType
    from max.graph import DeviceRef
    from max.nn.kv_cache import MHAKVCacheParams

    return MHAKVCacheParams(dtype=DType.float32, n_kv_heads=config.n_head, head_dim=config.n_embd // config.n_head,
                            num_layers=config.n_layer, page_size=PAGE, devices=[DeviceRef.CPU()])


def _versions(folder: Path, config, pages: int, batch: int):
    """The four compiled versions of the served graph by name, and a paged cache of `pages` pages for them."""
    from max.driver import CPU
    from max.engine import InferenceSession
    from max.pipelines.kv_cache import PagedKVCacheManager

    kv_params = kv_params_for(config)
    both = {"matmul_q8": _stand_in_product, "paged_flash_attention": _stand_in_attention}
    versions = {"step": ({}, False), "no_products": ({"matmul_q8": _stand_in_product}, False),
                "no_products_no_attention": (both, False), "no_layer_ops": (both, True)}
    graphs = {name: _compiled(folder, config, kv_params, stand_ins, plain)
              for name, (stand_ins, plain) in versions.items()}
    manager = PagedKVCacheManager(params=kv_params, session=InferenceSession(devices=[CPU()]),
                                  total_num_pages=len(versions) * pages + 1, max_batch_size=batch)
    return graphs, manager


def _shares(ms: dict) -> dict:
    return dict(**{f"{name}_ms": v for name, v in ms.items()}, products_ms=ms["step"] - ms["no_products"],
                attention_ms=ms["no_products"] - ms["no_products_no_attention"],
                norms_gelus_ms=ms["no_products_no_attention"] - ms["no_layer_ops"])


def _decode_room(streams: tuple[int, ...]) -> tuple[int, int]:
    """Pages a version needs for the decode split, and its largest batch."""
    return max(streams), max(streams)


def _prefill_room(prompts: tuple[int, ...]) -> tuple[int, int]:
    """Pages a version needs for the prefill split, and its largest batch."""
    return max(prompts) * -(-(LONG_PROMPT + PAGE) // PAGE), max(prompts)


def decode_split(folder: Path, config, streams: tuple[int, ...] = STREAMS, versions=None) -> list[dict]:
    """Per number of requests: the median ms of a decode step, whole, without its products, without its
    products and attention, and without its layer norms and GELUs too; and the shares they give. `versions`:
    `_versions`' graphs and cache, when the caller has them (else made here)."""
    graphs, manager = versions or _versions(folder, config, *_decode_room(streams))
    rng, out = np.random.default_rng(0), []
    for n in streams:
        requests = {name: _Requests(graph, manager, n, rng) for name, graph in graphs.items()}
        for r in requests.values():
            r.step()  # the prompts
        samples: dict[str, list[float]] = {name: [] for name in requests}
        for _ in range(ROUNDS):
            for name, r in requests.items():
                r.step()
                samples[name] += [r.step() for _ in range(STEPS)]
        for r in requests.values():
            r.release()
        out.append(dict(streams=n, **_shares({name: 1e3 * statistics.median(s) for name, s in samples.items()})))
    return out


def prefill_split(folder: Path, config, prompts: tuple[int, ...] = PREFILLS, versions=None) -> list[dict]:
    """Per number of prompts of LONG_PROMPT tokens: the median ms of their prefill in one call, whole, without
    its products, and without its products and attention (each version's prompts its own, in alternating
    rounds); and the shares they give. `versions` as for `decode_split`."""
    graphs, manager = versions or _versions(folder, config, *_prefill_room(prompts))
    rng, out = np.random.default_rng(0), []
    for n in prompts:
        samples: dict[str, list[float]] = {name: [] for name in graphs}
        for round_ in range(ROUNDS):
            for name, graph in graphs.items():
                requests = _Requests(graph, manager, n, rng, prompt=LONG_PROMPT)
                took = requests.step()
                requests.release()
                if round_:  # the first round is a warm-up
                    samples[name].append(took)
        out.append(dict(prompts=n, **_shares({name: 1e3 * statistics.median(s) for name, s in samples.items()})))
    return out


def split_report(rows: list[dict], machine: dict) -> str:
    cpu = f"{machine['processor']} ({', '.join(machine['vector_extensions'])}), {machine['cpus']} CPUs"
    lines = [f"{cpu}: step 18's served decode step (median ms over {ROUNDS} x {STEPS} steps, "
             f"{PROMPT}-token prompts then a token a request a step)", "",
             "| requests | step | products | attention | the rest | of the rest, norms and GELUs "
             "| tokens/s of the step alone |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['streams']} | {r['step_ms']:.1f} | {r['products_ms']:.1f} | {r['attention_ms']:.1f} | "
                     f"{r['no_products_no_attention_ms']:.1f} | {r['norms_gelus_ms']:.2f} | "
                     f"{1e3 * r['streams'] / r['step_ms']:.0f} |")
    return "\n".join(lines)


def prefill_report(rows: list[dict]) -> str:
    lines = [f"A prefill of {LONG_PROMPT}-token prompts in one call (median ms of {ROUNDS - 1})", "",
             "| prompts | prefill | products | attention | the rest | of the rest, norms and GELUs "
             "| prompt tokens/s |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        rate = 1e3 * r["prompts"] * LONG_PROMPT / r["step_ms"]
        lines.append(f"| {r['prompts']} | {r['step_ms']:.0f} | {r['products_ms']:.0f} | {r['attention_ms']:.0f} | "
                     f"{r['no_products_no_attention_ms']:.0f} | {r['norms_gelus_ms']:.0f} | {rate:.0f} |")
    return "\n".join(lines)


def _chain(n: int, k: int, rng):
    """CALLS of solution 18's products on random weights [n, k], compiled: x [1, k] -> each output's first k
    columns, the next one's x."""
    from max.driver import CPU
    from max.dtype import DType
    from max.experimental import functional as F
    from max.experimental.nn import Module
    from max.experimental.tensor import Tensor
    from max.graph import TensorType

    from solutions.solution_18 import matmul_q8

    class Product(Module):
        def __init__(self):
            self.q, self.scales = Tensor.zeros([n, k], dtype=DType.int8), Tensor.zeros([n, -(-k // BLOCK)])
            self.bias = Tensor.zeros([n])

    class Chain(Module):
        def __init__(self):
            self.products = [Product() for _ in range(CALLS)]

        def forward(self, x):
            for p in self.products:
                x = matmul_q8(x, p.q, p.scales, p.bias)[:, :k]
            return x

    weights = {}
    for i in range(CALLS):
        q, scales = quantize(rng.standard_normal((n, k)).astype(np.float32))
        weights |= {f"products.{i}.q": q, f"products.{i}.scales": scales, f"products.{i}.bias": np.zeros(n, np.float32)}
    with F.lazy():
        chain = Chain()
    return chain.compile(TensorType(DType.float32, [1, k], device=CPU()), weights=weights)


def product_calls(config, widths: tuple[int, ...] = WIDTHS, rounds: int = 50 * ROUNDS) -> dict:
    """What a call of solution 18's product costs at one row of x beside its weight bytes: chains of CALLS products
    on weights [N, n_embd] for N n_embd times each of `widths`, run in alternating rounds; a straight line through
    (MB a call, µs a call) crosses 0 MB at the call's own cost, and its slope is the rate the weights are read at.
    `calls_ms`: what the decode step's products (runtime.bandwidth.products) pay in calls."""
    from max.driver import Buffer

    k, rng = config.n_embd, np.random.default_rng(0)
    rows = tuple(w * k for w in widths)  # of each chain's weights
    chains = {n: _chain(n, k, rng) for n in rows}
    x = Buffer.from_numpy(rng.standard_normal((1, k)).astype(np.float32))
    took = alternating_seconds({n: lambda n=n: chains[n].execute_raw(x) for n in rows}, rounds)
    # (MB, µs) a call: int8 weights and a float32 scale a block
    points = [(n * k * (1 + 4 / BLOCK) / 1e6, 1e6 * statistics.median(took[n]) / CALLS) for n in rows]
    slope, call_us = np.polyfit(*zip(*points), 1)
    calls = sum(count for _, count in products(config).values())
    return dict(call_us=float(call_us), gb_per_s=float(1e3 / slope), points=points, calls=calls,
                calls_ms=calls * float(call_us) / 1e3)


def calls_report(calls: dict) -> str:
    widths = " and ".join(f"{mb:.2f} MB at {us:.0f} µs" for mb, us in calls["points"])
    return (f"A product's call at one row of x (chains of {CALLS}, weights of {widths} a call): "
            f"{calls['call_us']:.1f} µs beside its weights, read at {calls['gb_per_s']:.1f} GB/s; "
            f"the {calls['calls']} products of a decode step pay {calls['calls_ms']:.2f} ms in calls.")


def main(folder: Path, config, machine: dict, path: Path) -> int:
    # One compile of the four versions and one page pool, room enough for both splits.
    room = [max(both) for both in zip(_decode_room(STREAMS), _prefill_room(PREFILLS))]
    versions = _versions(folder, config, *room)
    rows = decode_split(folder, config, versions=versions)
    print(split_report(rows, machine))
    prefills = prefill_split(folder, config, versions=versions)
    print("\n" + prefill_report(prefills))
    calls = product_calls(config)
    print("\n" + calls_report(calls))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dict(machine=machine, split=rows, prefill=prefills, calls=calls), indent=1))
    return 0
