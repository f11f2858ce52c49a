"""The bench on a tiny GPT-2: solution 13's KV cache gives transformers' tokens, and a broken one is caught."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import run_python

# A decode that forgets its cache: every step after the prefill sees only the newest token.
FORGETFUL = """
import sys
import bench.kv_cache as kv
from bench.__main__ import main
from solutions.solution_13 import empty_cache

compile_with_cache = kv.compile_with_cache

def forgetful(model, config):
    run = compile_with_cache(model, config)
    return lambda ids, *cache: run(ids, *(empty_cache(config, 1) if int(ids.shape[-1]) == 1 else cache))

kv.compile_with_cache = forgetful
sys.exit(main(["--tiny", "--json", sys.argv[1]]))
"""


def test_tiny_bench_gives_transformers_tokens(tmp_path):
    out = tmp_path / "bench.json"
    done = run_python("-m", "bench", "--tiny", "--json", str(out), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(out.read_text())
    tokens = result["tokens"]
    assert tokens["identical"] and tokens["max_kv_cache"] == tokens["transformers_generate"]
    assert len(tokens["max_kv_cache"]) == result["decode"]["steps"] + 1
    for row in result["prefill"]:
        assert row["max_ms"] > 0 and row["transformers_ms"] > 0 and row["max_abs_diff"] < 1e-4
        assert abs(row["speedup"] - row["transformers_ms"] / row["max_ms"]) < 1e-9
    memory = result["memory"]
    assert memory["read_bandwidth_gb_s"] > 0.5
    assert abs(memory["max_fraction_of_limit"] * memory["limit_tokens_per_s"]
               - result["decode"]["max_tokens_per_s"]) < 1e-6
    assert "| prefill latency | 1 | 16 |" in done.stdout and "identical" in done.stdout
    decode = result["decode"]  # step 16's int8 decode, against transformers on the same dequantised weights
    assert decode["int8_same_tokens"] and abs(decode["int8_speedup"] * decode["transformers_tokens_per_s"]
                                              - decode["int8_tokens_per_s"]) < 1e-6
    assert "| greedy decode on int8 weights, step 16's kernel |" in done.stdout
    from bench.machine import cpu

    name, vectors = cpu()  # the header names the CPU and its vector extensions
    assert result["machine"]["processor"] == name and done.stdout.startswith(f"{name} ({', '.join(vectors)}")


def test_a_decode_that_forgets_its_cache_fails(tmp_path):
    out = tmp_path / "bench.json"
    done = run_python("-c", FORGETFUL, str(out), timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "DIFFERENT" in done.stdout and not json.loads(out.read_text())["tokens"]["identical"]


def test_weight_bytes_per_token_counts_what_a_decode_step_reads():
    from transformers import GPT2Config, GPT2LMHeadModel

    from runtime.bandwidth import weight_bytes_per_token
    from runtime.checkpoints import learner_config

    config = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=512, n_positions=64)
    model = GPT2LMHeadModel(config)
    # Every parameter once (the head is tied to wte), but wpe, of which one row is read.
    values = sum(p.numel() for p in model.parameters()) - model.transformer.wpe.weight.numel()
    assert weight_bytes_per_token(learner_config(config.to_dict())) == 4 * values


def test_the_mojo_kernel_computes_x_times_w_transposed():
    """bench.kernel's Mojo matrix-vector products (what `python -m bench.tried` measures) against numpy,
    with sizes that leave a remainder for each of its loops (16 floats per SIMD step, 4 rows per pass)."""
    from max.experimental.tensor import Tensor

    from bench.kernel import matvec, matvec_bias

    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in [(3, 37), (23, 37), (23,)])
    want = x.astype(np.float64) @ w.T.astype(np.float64)
    got = np.from_dlpack(matvec()(Tensor.from_dlpack(x), Tensor.from_dlpack(w)))
    with_bias = np.from_dlpack(matvec_bias()(Tensor.from_dlpack(x), Tensor.from_dlpack(w), Tensor.from_dlpack(b)))
    np.testing.assert_allclose(got, want, atol=1e-5)
    np.testing.assert_allclose(with_bias, want + b, atol=1e-5)


def test_the_peak_loops_compute_the_products_they_time():
    """bench.peak's loops (what `python -m bench.peak` times) give the sum of the products they claim, against
    numpy over one pass of their 64 operand positions: nothing hoisted or left out by the compiler."""
    from bench.machine import cpu
    from bench.peak import loop_op

    k = np.arange(64)
    rng = np.random.default_rng(0)
    floats = rng.uniform(0.5, 1.0, 1024).astype(np.float32)
    p = 16 * k
    w = floats[p[:, None] + np.arange(16)].astype(np.float64).sum(1)  # both weight vectors, each position
    x = floats[p[:, None] + np.arange(6)].astype(np.float64).sum(1)  # the six broadcast words
    np.testing.assert_allclose(loop_op(0, 64, floats), (x * w).sum(), rtol=1e-5)
    if "avx2" in cpu()[1]:
        data = rng.integers(-127, 128, 4096).astype(np.int8)  # as x's and q's int8 are
        p = 64 * k
        w = data[p[:, None] + np.arange(64)].reshape(64, 2, 32).astype(np.int64)  # [position, vector, byte]
        x = data[p[:, None] + np.arange(16)].reshape(64, 4, 4).astype(np.int64)  # [position, word, byte]
        want = np.einsum("kib,kvjb->", x, w.reshape(64, 2, 8, 4))  # each word times each 4 bytes of w
        assert loop_op(1, 64, data.view(np.float32)) == np.float32(want)


@pytest.mark.heavy  # a served model and transformers side by side: ~80 s, and the server slot waited for
def test_serving_bench_on_a_tiny_load(tmp_path, server_slot):
    """`bench --serve --tiny`: a real max serve of solution 14 at 1 and 2 streams, transformers beside it."""
    out = tmp_path / "serve.json"
    done = run_python("-m", "bench", "--serve", "--tiny", "--json", str(out), timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(out.read_text())
    from bench.serve import TINY, same_tokens

    assert [row["streams"] for row in result["levels"]] == list(TINY.streams) and same_tokens(result)
    for row in result["levels"]:
        for side in (row["served"], row["transformers"]):
            assert side["requests"] == TINY.rounds * row["streams"]
            assert side["tokens"] == side["requests"] * TINY.new_tokens and side["tokens_per_s"] > 0
            assert 0 < side["token_p50_ms"] <= side["token_p99_ms"]
    assert "| 2 |" in done.stdout and "goal >= 4x" in done.stdout
    assert result["scoring"]["prompts"] == 4 and result["scoring"]["every_token_scored"]
    assert result["scoring"]["max_abs_diff"] < 1e-3 and "Scoring (echo" in done.stdout


def test_serving_figures_are_computed_from_the_clocks():
    from bench.serve import Run, same_tokens, summary

    runs = [Run(sent=0.0, times=[0.5, 0.6, 0.8], text="", tokens=3),
            Run(sent=0.2, times=[0.9, 1.0, 1.1], text="", tokens=3)]
    got = summary(runs, seconds=2.0)
    gaps_ms = [100.0, 200.0, 100.0, 100.0]  # 0.6-0.5, 0.8-0.6, 1.0-0.9, 1.1-1.0
    assert got["tokens_per_s"] == 6 / 2.0 and got["requests"] == 2
    assert abs(got["ttft_p50_ms"] - np.median([500.0, 700.0])) < 1e-6
    assert abs(got["token_p50_ms"] - np.median(gaps_ms)) < 1e-6
    assert abs(got["token_p99_ms"] - np.percentile(gaps_ms, 99)) < 1e-6
    decode_ms = [(800.0 - 500.0) / 2, (1100.0 - 900.0) / 2]  # each request's last piece less its first, a token
    assert abs(got["decode_p50_ms"] - np.median(decode_ms)) < 1e-6
    turns = summary([Run(sent=0.0, times=[0.5, 0.9], text="", tokens=9)], seconds=1.0)  # 8 in one piece
    assert abs(turns["decode_p50_ms"] - 400.0 / 8) < 1e-6
    level = dict(served=dict(requests=2), same_text=2, exact_length=2)
    scoring = dict(every_token_scored=True, max_abs_diff=1e-5)
    assert same_tokens(dict(levels=[level], scoring=scoring))
    for wrong in (dict(same_text=1), dict(exact_length=1)):
        assert not same_tokens(dict(levels=[{**level, **wrong}], scoring=scoring))
    for wrong in (dict(every_token_scored=False), dict(max_abs_diff=0.01)):
        assert not same_tokens(dict(levels=[level], scoring={**scoring, **wrong}))


def test_transformers_side_is_greedy_over_the_tokenizers_ids(tmp_path):
    """bench.serve's generate() with its clock and vocabulary mask equals a plain argmax loop."""
    import torch
    from transformers import GPT2LMHeadModel

    from bench.decoders import hf_tiny
    from bench.serve import prompts, transformers_level

    model = GPT2LMHeadModel.from_pretrained(hf_tiny(tmp_path)).eval()
    vocab, batch = 300, prompts(list(range(300)), 2, 5, seed=0)
    figures, ids = transformers_level(model, vocab, [batch], new_tokens=6)
    want = torch.tensor(batch)
    with torch.no_grad():
        for _ in range(6):
            want = torch.cat([want, model(want).logits[:, -1, :vocab].argmax(-1, keepdim=True)], dim=1)
    assert ids == want[:, 5:].tolist() and figures["tokens"] == 12
    assert ids != transformers_level(model, 512, [batch], new_tokens=6)[1]  # the mask matters here


def test_prompts_are_drawn_from_whole_characters():
    """The serving bench's prompts never end inside a UTF-8 character (max serve would stream part of the
    prompt back): the stand-in's byte tokens that decode to U+FFFD are left out."""
    from transformers import AutoTokenizer

    from bench.serve import prompts, whole_characters
    from runtime.checkpoints import find_checkpoint

    tokenizer = AutoTokenizer.from_pretrained(find_checkpoint("synthetic").path)
    ids = whole_characters(tokenizer, len(tokenizer))
    assert 0 < len(ids) < len(tokenizer)
    drawn = {i for p in prompts(ids, 8, 32, seed=1) for i in p}
    assert drawn <= set(ids) and "\ufffd" not in tokenizer.decode(sorted(drawn))


def test_profile_times_max_and_the_kernel_on_every_product(monkeypatch):
    """`--profile`: a Linear's product and the tied head's timed through MAX and through step 15's
    kernel (whose result is checked against MAX's first), and the report sums both per token.
    Two small products with remainders of 16 and 4 stand in for GPT-2's five (each costs compiles)."""
    import bench.matvec
    from bench.report import report

    shapes = [("attn.c_attn", 40, 120, 2, True), ("tied head (wte.T)", 40, 101, 1, False)]
    monkeypatch.setattr(bench.matvec, "matvec_shapes", lambda config: shapes)
    rows = bench.matvec.time_matvecs(None, repeats=4, rounds=2)
    assert [r["name"] for r in rows] == [s[0] for s in shapes]
    for r, (_, n_in, n_out, _, _) in zip(rows, shapes):
        for side in ("", "kernel_"):
            assert r[f"{side}ms"] > 0 and abs(r[f"{side}gb_s"] - 4 * n_in * n_out / r[f"{side}ms"] / 1e6) < 1e-9
    decode = dict(prompt=4, steps=2, max_tokens_per_s=100.0, transformers_tokens_per_s=80.0, speedup=1.25,
                  kernel_tokens_per_s=125.0, kernel_speedup=1.5625, kernel_same_tokens=True, int8_tokens_per_s=250.0,
                  int8_speedup=3.125, int8_over_kernel=2.0, int8_same_tokens=True)
    memory = dict(read_bandwidth_gb_s=20.0, weight_mb_per_token=1.0, limit_tokens_per_s=20000.0,
                  max_fraction_of_limit=0.005, transformers_fraction_of_limit=0.004, kernel_fraction_of_limit=0.00625,
                  int8_mb_per_token=0.3, int8_fraction_of_limit=0.00375)
    text = report(dict(machine=dict(processor="cpu", vector_extensions=[], cpus=2, torch_threads=2), model="tiny",
                       repeats=1, decode=decode, memory=memory, prefill=[dict(batch=1, tokens=4, max_ms=1.0,
                       transformers_ms=1.0, speedup=1.0, max_abs_diff=0.0)], tokens=dict(identical=True,
                       max_kv_cache=[1, 2, 3]), matvecs=rows,
                       int8_split=dict(past=8, step_ms=2.0, before_ms=3.5, products_ms=1.25)))
    kernel_sum = sum(r["kernel_ms"] * r["per_token"] for r in rows)
    assert f"The kernel's products alone: {kernel_sum:.1f} ms per token of its decode step's 8.0 ms" in text
    assert f"MAX's products alone: {sum(r['ms'] * r['per_token'] for r in rows):.1f} ms" in text
    assert "| the rest of the step, before and after | 2.25, 0.75 |" in text


@pytest.mark.slow
def test_int8_split_times_the_step_before_and_after_and_its_products(tmp_path):
    """`--profile`'s int8 split on a tiny GPT-2: the step as solution 16 runs it, the step with step 13's
    attention in its place, and the products alone, each compiled and timed; the two steps give the same
    logits (the append kernel and the dropped mask change no number)."""
    from unittest import mock

    from max.experimental.tensor import Tensor

    import solutions.solution_16 as sixteen
    from bench.decoders import hf_tiny, int8_model
    from bench.matvec import int8_split
    from runtime.checkpoints import learner_config
    from runtime.compiling import compile_decode
    from solutions.solution_13 import attention_with_cache

    folder = hf_tiny(tmp_path)
    config = learner_config(json.loads((folder / "config.json").read_text()))
    model = int8_model(folder, config)
    split = int8_split(model, config, past=8, repeats=4)
    assert split["past"] == 8 and min(split["step_ms"], split["before_ms"], split["products_ms"]) > 0
    rng = np.random.default_rng(1)
    cache = [Tensor.from_dlpack(rng.standard_normal((1, config.n_head, 8, config.n_embd // config.n_head))
                                .astype(np.float32)) for _ in range(2 * config.n_layer)]
    ids = Tensor.from_dlpack(np.array([[3]], dtype=np.int64))
    after = compile_decode(sixteen.GPT2Quantized(model), config)(ids, *cache)
    with mock.patch.object(sixteen, "decode_attention", attention_with_cache):
        before = compile_decode(sixteen.GPT2Quantized(model), config)(ids, *cache)
    for a, b in zip(after, before):  # the logits, then every grown cache
        np.testing.assert_allclose(np.from_dlpack(a), np.from_dlpack(b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("package, said", [
    (None, "llama-cpp-python is not installed"),
    ("import diskcache_not_here\n",
     "cannot be imported: No module named 'diskcache_not_here', a package it depends on"),
    ("raise OSError('libllama.so: cannot open shared object file')\n", "cannot be imported: OSError: libllama.so"),
])
def test_llama_cpp_says_why_it_cannot_be_measured(tmp_path, monkeypatch, package, said):
    """Not installed, installed without a package it needs, its library unloadable: each said as what it is."""
    import sys

    from bench.llama import missing

    monkeypatch.delitem(sys.modules, "llama_cpp", raising=False)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *(p for p in sys.path if "site-packages" not in p)])
    if package is not None:
        (tmp_path / "llama_cpp").mkdir()
        (tmp_path / "llama_cpp" / "__init__.py").write_text(package)
    assert said in missing(None)


@pytest.mark.parametrize("no_repack", [True, False])
def test_llama_cpp_repacks_its_weights_only_where_that_cannot_crash(tmp_path, monkeypatch, no_repack):
    """Where the CPU has AMX (NO_REPACK) llama.cpp loads the model with its extra buffer types off (its AMX
    product crashes on GPT-2); elsewhere with its defaults; llama-cpp-python's defaults are left as they were."""
    import sys

    import bench.llama as llama

    (tmp_path / "llama_cpp").mkdir()
    (tmp_path / "llama_cpp" / "__init__.py").write_text("from llama_cpp.llama import Llama\n")
    (tmp_path / "llama_cpp" / "llama.py").write_text(
        "from types import SimpleNamespace as Params\n"
        "llama_cpp = Params(llama_model_default_params=lambda: Params(use_extra_bufts=True))\n"
        "loaded = []\n"
        "class Llama:\n"
        "    def __init__(self, **kwargs):\n"
        "        loaded.append(llama_cpp.llama_model_default_params())\n")
    for name in ("llama_cpp", "llama_cpp.llama"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(llama, "NO_REPACK", no_repack)
    llama.decoder(tmp_path / "model-q8_0.gguf")
    wrapper = sys.modules["llama_cpp.llama"]
    assert [p.use_extra_bufts for p in wrapper.loaded] == [not no_repack]
    assert wrapper.llama_cpp.llama_model_default_params().use_extra_bufts


def test_by_context_gives_the_pair_more_turns_and_keeps_each_ones_best(monkeypatch):
    """The two decoders a ratio is taken of run pair_rounds turns at each context, the others rounds; each
    figure is its decoder's best turn (steps / its fastest seconds), whichever turn that was."""
    import bench.flash as flash

    monkeypatch.setattr(flash, "settled", lambda: None)
    turns = {"slow": [], "a": [], "b": []}

    def decoder(name, seconds):
        def decode(prompt, steps):
            turns[name].append(prompt.shape[1])
            return prompt, seconds[(len(turns[name]) - 1) % len(seconds)]
        return decode

    rates = flash.by_context({"slow": decoder("slow", [2.0, 1.0]), "a": decoder("a", [0.5, 0.4, 0.2, 0.3]),
                              "b": decoder("b", [0.1])}, 50, contexts=(1, 7), steps=4, rounds=2,
                             pair=("a", "b"), pair_rounds=5)
    assert turns == {"slow": [1, 1, 7, 7], "a": [1] * 5 + [7] * 5, "b": [1] * 5 + [7] * 5}
    assert rates == {"slow": [4.0, 4.0], "a": [20.0, 20.0], "b": [40.0, 40.0]}


def test_peak_memory_of_a_call_sees_a_buffer_it_touches_and_frees():
    """bench --memory's measure: a call that fills and drops a 48 MB buffer peaks 48 MB above where it
    started and keeps nothing; a call that allocates nothing peaks at nothing. In a process of its own, as
    bench --memory runs: in a worker that ran other tests, freed pages an allocator keeps could take the
    buffer without raising the peak."""
    import sys

    if not sys.platform.startswith("linux"):
        pytest.skip("Linux's /proc/self/clear_refs")
    run = run_python("-c", "import numpy as np; from bench.flash import _peak_above; "
                     "print(*_peak_above(lambda: np.ones(12 * 2**20, np.float32).sum()), "
                     "_peak_above(lambda: None)[0])", timeout=120)
    peak, kept, idle = map(float, run.stdout.split())
    assert 48e6 <= peak < 60e6 and kept < 8e6 and idle < 2e6, (peak, kept, idle)


@pytest.mark.slow
def test_decode_split_takes_the_products_and_the_attention_out_of_the_served_step(checkpoints):
    """`--decode-split` on the GPT-2-shaped stand-in at 16 requests: the served step, without its products,
    without its attention too, and without its layer norms and GELUs too; the products are most of the step, the
    attention and the rest take time of their own, and the report shows each share."""
    from bench.machine import machine
    from bench.served_split import decode_split, split_report

    checkpoint = checkpoints["synthetic"]
    [row] = decode_split(checkpoint.path, checkpoint.learner_config(), streams=(16,))
    assert row["streams"] == 16 and row["products_ms"] > 0.3 * row["step_ms"], row
    assert row["attention_ms"] > 0 and row["no_products_no_attention_ms"] > 0, row
    assert row["no_layer_ops_ms"] > 0 and row["norms_gelus_ms"] == pytest.approx(
        row["no_products_no_attention_ms"] - row["no_layer_ops_ms"]), row
    text = split_report([row], machine())
    assert f"| 16 | {row['step_ms']:.1f} | {row['products_ms']:.1f} | {row['attention_ms']:.1f} |" in text, text
    assert f"| {row['norms_gelus_ms']:.2f} |" in text and "norms and GELUs" in text, text


@pytest.mark.slow
def test_prefill_split_takes_the_products_and_the_attention_out_of_a_prefill(checkpoints):
    """`--decode-split`'s prefill of 512-token prompts: the products and the attention each take a share of
    their own, the rest is small beside them, and the report shows each."""
    from bench.served_split import LONG_PROMPT, prefill_report, prefill_split

    checkpoint = checkpoints["synthetic"]
    [row] = prefill_split(checkpoint.path, checkpoint.learner_config(), prompts=(2,))
    assert row["prompts"] == 2 and row["products_ms"] > 0.2 * row["step_ms"], row
    assert row["attention_ms"] > 0 and row["no_products_no_attention_ms"] < row["attention_ms"], row
    text = prefill_report([row])
    assert f"| 2 | {row['step_ms']:.0f} | {row['products_ms']:.0f} | {row['attention_ms']:.0f} |" in text, text
    assert f"{LONG_PROMPT}-token prompts" in text, text
    assert f"| {row['norms_gelus_ms']:.0f} |" in text and "norms and GELUs" in text, text


@pytest.mark.slow
def test_product_calls_part_a_call_from_its_bytes(checkpoints):
    """`--decode-split`'s product calls: the wider chain takes longer a call, the line goes through both chains'
    figures, the decode step's calls are GPT-2's 4 a block and the head's, and the report gives each figure.
    (Where the line crosses 0 MB is a measurement, not held here: a machine busy with other work moves it.)"""
    from bench.served_split import calls_report, product_calls

    checkpoint = checkpoints["synthetic"]
    config = checkpoint.learner_config()
    calls = product_calls(config, rounds=20)
    (mb_small, us_small), (mb_wide, us_wide) = calls["points"]
    assert mb_small < mb_wide and us_small < us_wide, calls
    for mb, us in calls["points"]:  # the line goes through both
        assert calls["call_us"] + 1e3 * mb / calls["gb_per_s"] == pytest.approx(us), calls
    assert calls["calls"] == 4 * config.n_layer + 1, calls
    assert calls["calls_ms"] == pytest.approx(calls["calls"] * calls["call_us"] / 1e3), calls
    text = calls_report(calls)
    assert f"{calls['call_us']:.1f} µs beside its weights" in text and f"{calls['gb_per_s']:.1f} GB/s" in text, text
    assert f"{calls['calls_ms']:.2f} ms in calls" in text, text


def test_the_floor_is_gpt2_of_one_layer_with_the_vocabulary_and_is_reported(tmp_path, checkpoints):
    """`--serve --fast` also serves a GPT-2 of one layer of width 64 with the checkpoint's vocabulary and
    tokenizer, to measure what max serve takes a token around an almost free graph; the report says it."""
    from transformers import AutoTokenizer, GPT2LMHeadModel

    from bench.servers import floor_checkpoint, report

    checkpoint = checkpoints["synthetic"]
    folder = floor_checkpoint(checkpoint, tmp_path / "floor")
    model = GPT2LMHeadModel.from_pretrained(folder)
    assert (model.config.n_layer, model.config.n_embd, model.config.n_head) == (1, 64, 1)
    assert model.config.vocab_size == checkpoint.config()["vocab_size"]
    assert AutoTokenizer.from_pretrained(folder).encode("Hello") == AutoTokenizer.from_pretrained(
        checkpoint.path).encode("Hello")
    row = dict(prompt_tokens=32, streams=1, same_text=0, requests=2, tokens_per_s=190.8, ttft_p50_ms=16.0,
               token_p50_ms=4.45, token_p99_ms=11.0)
    result = dict(machine=dict(processor="a CPU", vector_extensions=["avx2"], cpus=2), model="a stand-in",
                  load=dict(new_tokens=64), results={"step 18": [row], "transformers": [row], "floor": [row]},
                  memory_mb={}, llama_cpp={"reason": None})
    text = report(result)
    assert "one stream of 32-token prompts: 190.8 tokens/s, 5.2 ms a token" in text, text
    assert "floor tokens/s" not in text, text
    assert "One stream" not in text, text  # a result from before the bench timed a request's other tokens


def test_the_serving_report_says_what_each_servers_cache_holds():
    """The report names llama-server's slots and the pool steps 18 and 14 share among their streams."""
    from bench.servers import report

    row = dict(prompt_tokens=512, streams=16, same_text=0, requests=32, tokens_per_s=118.1, ttft_p50_ms=90.0,
               token_p50_ms=40.0, token_p99_ms=300.0)
    result = dict(machine=dict(processor="a CPU", vector_extensions=["avx2"], cpus=2), model="a stand-in",
                  load=dict(new_tokens=64), results={"step 18": [row], "transformers": [row]},
                  memory_mb={"step 18": 2100.0}, llama_cpp={"reason": None},
                  cache=dict(positions=10240, context=584, parallel=16))
    text = report(result)
    assert "llama-server 16 slots of 584 positions (f16)" in text, text
    assert "one pool of 10240 positions in pages of 128 (float32), shared by the streams" in text, text
    assert "step 18 2100 MB" in text, text
    assert "One stream" not in text, text  # no level of one stream
    one = dict(row, prompt_tokens=32, streams=1, ttft_p50_ms=31.6, decode_p50_ms=6.234)
    text = report({**result, "results": {"step 18": [one], "llama.cpp": [dict(one, ttft_p50_ms=11.2,
                                                                              decode_p50_ms=6.1)]}})
    assert ("One stream of 32-token prompts, a request's first token and then each of its others (p50, ms): "
            "step 18 32 then 6.23, llama.cpp 11 then 6.10.") in text, text


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="peak memory is read from Linux's /proc")
def test_peak_memory_counts_a_servers_children():
    """A server's memory is in its worker, a grandchild: peak_rss_mb takes the largest of the whole tree."""
    from bench.servers import peak_rss_mb

    holder = subprocess.Popen(["bash", "-c", f"{sys.executable} -c \"b = bytearray(300 << 20); print(1, flush=True); "
                               "input()\"; true"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "1"  # the grandchild holds its 300 MB
        assert peak_rss_mb(holder.pid) >= 300
    finally:
        holder.communicate("\n", timeout=30)


def test_the_pool_holds_llama_servers_slots():
    """The pool the bench and the soak give steps 18 and 14: llama-server's 16 slots of 584 positions (the longest
    prompt, its new tokens and 8) in whole pages of 128, 5 each, 80 in all, over 0.9 (MAX's admission): 89 pages."""
    from bench.servers import FULL, pool_for

    assert pool_for(FULL, 1024) == (89 * 128, 584)


def test_the_serving_bench_says_where_a_served_text_differs():
    """A text that is not transformers' is placed: the request, its first differing character, and whether it is
    another request's text; the report lists step 14's (float32, as the reference: each one a fault)."""
    from bench.servers import differing, report

    expected = ["one two", "three four", "five six"]
    got = differing(["one two", "five six", "five sux"], expected)
    assert got == [dict(request=1, first_differing_character=0, served_length=8, expected_length=10,
                        another_requests_text=2),
                   dict(request=2, first_differing_character=6, served_length=8, expected_length=8,
                        another_requests_text=None)], got
    assert differing(["one two", "three four\ufffd"[:-1], "five six"], expected) == []
    row = dict(prompt_tokens=32, streams=16, same_text=1, requests=3, tokens_per_s=100.0, ttft_p50_ms=90.0,
               token_p50_ms=40.0, token_p99_ms=300.0, differing=got)
    result = dict(machine=dict(processor="a CPU", vector_extensions=["avx2"], cpus=2), model="a stand-in",
                  load=dict(new_tokens=64), results={"step 18": [dict(row, differing=got[1:])], "step 14": [row],
                                                     "transformers": [row]},
                  memory_mb={}, llama_cpp={"reason": None})
    text = report(result)
    assert "32-token prompts, 16 streams: requests 1 (from character 0), 2 (from character 6) differ; 1 of them " \
           "another request's text." in text, text
    assert text.count("differ;") == 1, text  # step 18's int8 texts are not listed


@pytest.mark.heavy  # a served model and transformers: ~2 min, and the server slot waited for
def test_soak_on_a_tiny_load(server_slot):
    """`bench --soak 1 --tiny`: step 14's server through the tiny load's levels, every text transformers'."""
    from bench.servers import TINY, measured

    done = run_python("-m", "bench", "--soak", "1", "--tiny", timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    for s in TINY.streams:
        assert f"round 1, {s} streams: " in done.stdout and f"{measured(s)} of {measured(s)} texts transformers'" \
            in done.stdout, done.stdout
    assert f"0 of {len(TINY.streams)} levels had a text that differs." in done.stderr, done.stderr


def test_again_finds_the_first_step_that_differs():
    """bench.again compares each time's logits with the first time's bit for bit: the first step that differs and
    how far apart there; None when every step is alike."""
    from bench.again import first_difference

    first = [np.zeros((2, 5), np.float32), np.ones((2, 5), np.float32), np.full((2, 5), 2.0, np.float32)]
    again = [a.copy() for a in first]
    assert first_difference(first, again) is None
    again[1][1, 3] += 0.5
    again[2][0, 0] = np.nextafter(np.float32(2.0), np.float32(3.0))  # a later step off by one bit
    step, apart = first_difference(first, again)
    assert step == 1 and apart == 0.5
    again[1] = first[1].copy()
    step, apart = first_difference(first, again)
    assert step == 2 and apart == float(np.nextafter(np.float32(2.0), np.float32(3.0)) - np.float32(2.0))


def test_the_busy_loops_stop_however_the_block_ends():
    import os

    import psutil

    from bench.machine import neighbours

    with pytest.raises(KeyboardInterrupt), neighbours(os.cpu_count()):
        loops = [p for p in psutil.Process().children() if "while os.getppid()" in " ".join(p.cmdline())]
        assert len(loops) == os.cpu_count()
        raise KeyboardInterrupt
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in loops)


@pytest.mark.heavy  # a served graph compiled: ~1 min
def test_again_on_the_tiny_model():
    """`bench --again 2 --tiny`: step 14's served graph twice on the same batch, alike (exit status 0)."""
    done = run_python("-m", "bench", "--again", "2", "--tiny", timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "time 2: as the first" in done.stdout and "0 of 1 times differed from the first." in done.stdout, \
        done.stdout
