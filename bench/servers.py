"""`python -m bench --serve --fast`: step 18's server against step 14's, llama.cpp's own and transformers', the same
requests to each, in one run.

    step 18       solution 18 behind `max serve` (`serve --fast`): paged FlashAttention and batched int8 products
    step 14       solution 14 behind `max serve`: MAX's attention, float32 matmuls
                  (both: a batch of up to the largest S; one pool for llama-server's PARALLEL slots of the longest
                  request, in whole pages, and a tenth more: MAX's scheduler admits no prompt beside decoding
                  requests while the pool is over 90% full, and queues one while no page is free)
    llama.cpp     `llama-server` (--llama-server BINARY) on the same checkpoint as GGUF Q8_0 (converted with the
                  llama.cpp tree given as --llama-cpp SOURCE), --parallel 16, continuous batching, a thread a CPU
    transformers  GPT2LMHeadModel.generate, `streams` prompts in one batch (bench/serve.py's)

At each number of streams S and prompt length P: a warm-up round of S requests, then measured(S) requests (2 x S,
at least MEASURED_AT_LEAST; one stream 16, in ROUNDS_AT_ONE rounds with the servers taking turns in each), S in
flight at any time (transformers: batches of S), each P prompt ids and NEW_TOKENS new ones, greedy, no EOS stop;
tokens/s, time to first token p50 and per-token p99 (bench/serve.py's summary); at one stream, each server's first
token and then each of a request's other tokens. Every served text is compared with transformers' greedy ids (step
18's with transformers on the same dequantised weights would be the tighter rule; the float32 ids are the same on
the stand-ins and GPT-2 for all but a few requests, so the share that agrees is reported, not required); each text
that differs is placed (`differing`: the request, its first differing character, whether it is another request's
text), and the report lists step 14's, whose every difference is a fault. The peak resident memory of each
server's process tree is read after the 16-stream level.
Every server is started first and the levels go one at a time, transformers and then each server in turn (the
order turned by one a level, and by one a round): a level's figures are taken seconds apart, not minutes, whatever
the machine's neighbours do to its speed over the run. While one is measured the other servers are stopped
(SIGSTOP; an idle max serve polls its queue).

    floor         solution 14 behind `max serve` on a GPT-2 of one layer of width 64 with the checkpoint's
                  vocabulary, one stream of the shortest prompts: what max serve takes a token around a graph
                  that costs almost nothing (its sampler, the batch's inputs, the scheduler, the API process)
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.llama import NO_REPACK, REPACK_NOTE, convert
from bench.serve import prompts, served_runs, summary, transformers_level, whole_characters
from runtime.paths import REPO, shown
from runtime.server import PAGE, Server, descendants, free_port, same_text

# torch, transformers and matplotlib are imported inside the functions that use them: importing them takes seconds.


@dataclass(frozen=True)
class Load:
    streams: tuple[int, ...]
    prompt_tokens: tuple[int, ...]
    new_tokens: int


FULL = Load(streams=(1, 4, 16, 32), prompt_tokens=(32, 512), new_tokens=64)
TINY = Load(streams=(1, 2), prompt_tokens=(8,), new_tokens=8)  # the machinery, quickly
PARALLEL = 16  # llama-server's slots
ADMITS = 0.9  # MAX's scheduler admits no new prompt beside decoding ones while the pool is fuller than this
MEMORY_AT = 16  # the level after which each server's peak memory is read
MEASURED_AT_LEAST = 8  # requests measured at every level
ROUNDS_AT_ONE, A_ROUND = 4, 4  # one stream's requests go in 4 rounds of 4, every server in turn in each


def measured(streams: int) -> int:
    """How many requests are measured at `streams` in flight, after the warm-up round."""
    return ROUNDS_AT_ONE * A_ROUND if streams == 1 else max(2 * streams, MEASURED_AT_LEAST)


def rounds(streams: int) -> int:
    """The rounds a level's measured requests go in: a level of one stream is seconds long a server, so its
    requests go in ROUNDS_AT_ONE rounds, the servers taking turns in each, and its figures come from windows
    seconds apart, not from one each; a level of more streams goes in one (its tail, the last requests with
    fewer in flight, once)."""
    return ROUNDS_AT_ONE if streams == 1 else 1


def peak_rss_mb(pid: int) -> float:
    """The largest peak resident memory (VmHWM) of `pid` and its descendants, in MB."""
    peaks = []
    for p in [pid, *descendants(pid)]:
        try:
            status = Path(f"/proc/{p}/status").read_text()
        except OSError:
            continue
        peaks += [int(line.split()[1]) / 1024 for line in status.splitlines() if line.startswith("VmHWM")]
    return max(peaks, default=float("nan"))


@contextmanager
def llama_server(binary: Path, gguf: Path, context: int):
    """llama-server on 127.0.0.1, a free port, PARALLEL slots of `context` positions each: (url, pid)."""
    port = free_port()
    log = tempfile.NamedTemporaryFile(prefix="llama-server-", suffix=".log", delete=False)
    command = [str(binary), "-m", str(gguf), "--host", "127.0.0.1", "--port", str(port), "--parallel", str(PARALLEL),
               "-c", str(PARALLEL * context), "--threads", str(os.cpu_count()), "--cont-batching",
               *(["--no-repack"] if NO_REPACK else [])]
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 300
        while time.time() < deadline:
            try:
                if urllib.request.urlopen(url + "/health", timeout=2).status == 200:
                    break
            except OSError:
                time.sleep(0.5)
            if process.poll() is not None:
                raise RuntimeError(f"llama-server stopped: {Path(log.name).read_text()[-2000:]}")
        yield url, process.pid
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def level_prompts(ids: list[int], length: int, streams: int) -> list[list[int]]:
    """A level's requests: `streams` to warm up, then measured(streams), each `length` ids, seeded by the level
    (bench/soak.py sends the same ones)."""
    return prompts(ids, streams + measured(streams), length, seed=length * 100 + streams)


def differing(served: list[str], expected: list[str]) -> list[dict]:
    """Each served text that is not its expected one: which request, the first character that differs, and
    which other request's expected text it is, if it is one (a reply sent to the wrong request)."""
    out = []
    for i, (got, want) in enumerate(zip(served, expected)):
        if not same_text(got, want):
            at = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
            other = next((j for j, w in enumerate(expected) if j != i and same_text(got, w)), None)
            out.append(dict(request=i, first_differing_character=at, served_length=len(got),
                            expected_length=len(want), another_requests_text=other))
    return out


def _level(length: int, streams: int, runs: list, seconds: float, expected: list, tokenizer) -> dict:
    """One (prompt length, streams) level of one server, its measured `runs` in the request order of `expected`:
    its summary, how many texts are transformers', and where the others differ."""
    want = [tokenizer.decode(e, skip_special_tokens=True) for e in expected]
    differ = differing([r.text for r in runs], want)
    return dict(prompt_tokens=length, streams=streams, same_text=len(runs) - len(differ), differing=differ,
                **summary(runs, seconds))


@contextmanager
def alone(running: int | None, groups: list[int]):
    """Every server's process group but `running`'s stopped (SIGSTOP) for the block, continued after: an idle max
    serve polls its queue, ~12% of a CPU each on this machine's two."""
    stopped = [g for g in groups if g != running]
    for group in stopped:
        os.killpg(group, signal.SIGSTOP)
    try:
        yield
    finally:
        for group in stopped:
            os.killpg(group, signal.SIGCONT)


def pool_for(load: Load, n_positions: int) -> tuple[int, int]:
    """(the positions of steps 18 and 14's pool, those of a slot of llama-server): llama-server's PARALLEL slots of
    the longest request in whole pages, and a tenth more, since MAX admits no prompt while it is ADMITS full."""
    context = max(load.prompt_tokens) + load.new_tokens + 8  # positions a slot of llama-server holds
    pages = math.ceil(PARALLEL * math.ceil(context / PAGE) / ADMITS)
    return max(pages * PAGE, n_positions), context


def floor_checkpoint(checkpoint, folder: Path) -> Path:
    """A GPT-2 of one layer, width 64 (one head of GPT-2's 64), the checkpoint's vocabulary and tokenizer."""
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    config = GPT2Config.from_pretrained(checkpoint.path, n_layer=1, n_embd=64, n_head=1)
    GPT2LMHeadModel(config).save_pretrained(folder, safe_serialization=True)
    AutoTokenizer.from_pretrained(checkpoint.path).save_pretrained(folder)
    return folder


def measure(checkpoint, load: Load, source: Path | None, binary: Path | None) -> dict:
    """Every figure, the same requests to each: every server started first, then level by level transformers and
    each server in turn (the order turned by one each level and each round, the others stopped meanwhile), so that
    a level's figures are not minutes apart and a machine that speeds up or slows down during the run moves them
    alike."""
    import torch
    from transformers import AutoTokenizer, GPT2LMHeadModel

    tokenizer = AutoTokenizer.from_pretrained(checkpoint.path)
    vocab = min(len(tokenizer), checkpoint.config()["vocab_size"])
    ids = whole_characters(tokenizer, vocab)
    levels = [(length, s) for length in load.prompt_tokens for s in load.streams]
    work = {(length, s): level_prompts(ids, length, s) for length, s in levels}
    torch.set_grad_enabled(False)
    hf = GPT2LMHeadModel.from_pretrained(checkpoint.path, dtype=torch.float32).eval()
    llama = {"reason": None}
    if source is None or binary is None or not Path(binary).is_file():
        llama["reason"] = "give --llama-cpp SOURCE (a llama.cpp tree) and --llama-server BINARY"
    elif NO_REPACK:
        llama["note"] = REPACK_NOTE
    results: dict[str, list[dict]] = {"transformers": []}
    memory: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        gguf = None if llama["reason"] else convert(checkpoint.path, source, Path(tmp))  # first: a failure stops
        servers = {}  # name -> (url, pid)
        pool, context = pool_for(load, checkpoint.config()["n_positions"])
        for name, step in (("step 18", "18"), ("step 14", "14")):
            print(f"starting {name} under max serve:", file=sys.stderr, flush=True)
            server = stack.enter_context(Server(REPO / "solutions" / f"solution_{step}.py", checkpoint.path,
                                                max_batch_size=max(load.streams), pool_positions=pool))
            servers[name] = server.url, server.process.pid
        print("starting max serve's floor (step 14 on a GPT-2 of one layer of width 64):", file=sys.stderr, flush=True)
        floor = stack.enter_context(Server(REPO / "solutions" / "solution_14.py",
                                           floor_checkpoint(checkpoint, Path(tmp) / "floor"), max_batch_size=1))
        if gguf is not None:
            print("starting llama.cpp's llama-server:", file=sys.stderr, flush=True)
            servers["llama.cpp"] = stack.enter_context(
                llama_server(binary, gguf, context))
        groups = {pid: os.getpgid(pid) for pid in [*(pid for _, pid in servers.values()), floor.process.pid]}
        for at, (length, s) in enumerate(levels):
            requests = work[length, s]
            with alone(None, list(groups.values())):
                transformers_level(hf, vocab, [requests[:s]], load.new_tokens)  # warm-up
                rest = requests[s:]
                theirs, expected = transformers_level(hf, vocab, [rest[i:i + s] for i in range(0, len(rest), s)],
                                                      load.new_tokens)
            results["transformers"].append(dict(prompt_tokens=length, streams=s, same_text=len(rest), **theirs))
            said = [f"transformers {theirs['tokens_per_s']:.1f}"]
            names = list(servers)
            taken = {name: ([], 0.0) for name in names}  # each server's runs and seconds, round by round
            cut = -(-len(rest) // rounds(s))
            for r in range(rounds(s)):
                turn = at + r
                for name in names[turn % len(names):] + names[:turn % len(names)]:
                    url, pid = servers[name]
                    with alone(groups[pid], list(groups.values())):
                        warm = requests[:s] if r == 0 else []  # the first round warms up
                        runs, seconds = served_runs(url, s, warm + rest[r * cut:(r + 1) * cut], load.new_tokens,
                                                    warm=len(warm))
                    taken[name] = (taken[name][0] + runs, taken[name][1] + seconds)
            for name in names:
                row = _level(length, s, *taken[name], expected, tokenizer)
                results.setdefault(name, []).append(row)
                said.append(f"{name} {row['tokens_per_s']:.1f}")
                if s == MEMORY_AT:
                    memory[name] = peak_rss_mb(servers[name][1])
            if (length, s) == (load.prompt_tokens[0], 1):  # the floor: one stream of the shortest prompts
                with alone(groups[floor.process.pid], list(groups.values())):
                    results["floor"] = [_level(length, s, *served_runs(floor.url, s, requests, load.new_tokens, warm=s),
                                               expected, tokenizer)]
            print(f"{length}-token prompts, {s} streams: {', '.join(said)} tokens/s", file=sys.stderr, flush=True)
    return dict(load=asdict(load), results=results, memory_mb=memory, llama_cpp=llama,
                cache=dict(positions=pool, context=context, parallel=PARALLEL))


def report(result: dict) -> str:
    m, load = result["machine"], result["load"]
    names = [n for n in ("step 18", "step 14", "llama.cpp", "transformers") if n in result["results"]]
    lines = [f"{m['processor']} ({', '.join(m['vector_extensions']) or 'no vector extensions listed'}), {m['cpus']} "
             f"CPUs; {result['model']}",
             f"Each request: its prompt's ids, {load['new_tokens']} new tokens, greedy; a warm-up round, then "
             f"2 x streams requests (at least {MEASURED_AT_LEAST}), streams in flight; one stream {measured(1)} "
             f"requests in {ROUNDS_AT_ONE} rounds, the servers taking turns in each", "",
             "| prompt | streams | " + " | ".join(f"{n} tokens/s" for n in names) + " | step 18 / llama.cpp | "
             "step 18 / transformers | TTFT p50 (ms) | per-token p99 (ms) |",
             "| --- " * (len(names) + 6) + "|"]
    table = {n: {(r["prompt_tokens"], r["streams"]): r for r in result["results"][n]} for n in names}
    for key in table["step 18"]:
        row = {n: table[n].get(key) for n in names}

        def ratio(a, b):
            return f"{row[a]['tokens_per_s'] / row[b]['tokens_per_s']:.2f}x" if row.get(a) and row.get(b) else "-"

        lines.append(f"| {key[0]} | {key[1]} | " + " | ".join(f"{row[n]['tokens_per_s']:.1f}" if row[n] else "-"
                                                            for n in names)
                     + f" | {ratio('step 18', 'llama.cpp')} | {ratio('step 18', 'transformers')} | "
                     + " / ".join(f"{row[n]['ttft_p50_ms']:.0f}" for n in names if row[n]) + " | "
                     + " / ".join(f"{row[n]['token_p99_ms']:.0f}" for n in names if row[n]) + " |")
    lines += ["", "TTFT and per-token columns: " + " / ".join(names) + "."]
    for key in (k for k in table["step 18"] if k[1] == 1):  # one stream's time: its first token, then the rest
        said = [f"{n} {r['ttft_p50_ms']:.0f} then {r['decode_p50_ms']:.2f}" for n in names
                if (r := table[n].get(key)) and "decode_p50_ms" in r]
        if said:
            lines.append(f"One stream of {key[0]}-token prompts, a request's first token and then each of its others "
                         f"(p50, ms): " + ", ".join(said) + ".")
    lines += ["Peak resident memory after the 16-stream level: " + ", ".join(
                  f"{n} {mb:.0f} MB" for n, mb in result["memory_mb"].items()) + "."]
    if cache := result.get("cache"):
        lines.append(f"The caches: llama-server {cache['parallel']} slots of {cache['context']} positions (f16); "
                     f"steps 18 and 14 one pool of {cache['positions']} positions in pages of {PAGE} (float32), "
                     "shared by the streams.")
    for n in names[:-1]:
        same = sum(r["same_text"] for r in result["results"][n])
        total = sum(r["requests"] for r in result["results"][n])
        lines.append(f"{n}: {same} of {total} texts equal transformers' float32 greedy ids decoded"
                     + (" (on a stand-in, llama.cpp's GGUF holds only the tokenizer's ids as text: the others come "
                        "back empty)" if n == "llama.cpp" and "SYNTHETIC" in result["model"] else "") + ".")
        if n == "step 14":  # float32, as transformers: a text that differs is a fault to find (step 18's are int8)
            for r in result["results"][n]:
                if differ := r.get("differing"):
                    others = sum(d["another_requests_text"] is not None for d in differ)
                    lines.append(f"  {r['prompt_tokens']}-token prompts, {r['streams']} streams: requests "
                                 + ", ".join(f"{d['request']} (from character {d['first_differing_character']})"
                                             for d in differ)
                                 + f" differ; {others} of them another request's text.")
    if floor := result["results"].get("floor"):
        lines.append(f"max serve's floor, step 14 on a GPT-2 of one layer of width 64 and the same vocabulary, one "
                     f"stream of {floor[0]['prompt_tokens']}-token prompts: {floor[0]['tokens_per_s']:.1f} tokens/s, "
                     f"{1e3 / floor[0]['tokens_per_s']:.1f} ms a token: what serving takes around the graph.")
    if result["llama_cpp"]["reason"]:
        lines.append(f"llama.cpp: not measured: {result['llama_cpp']['reason']}.")
    if "note" in result["llama_cpp"]:
        lines.append(f"({result['llama_cpp']['note']}.)")
    return "\n".join(lines)


def draw(result: dict, path: Path) -> None:
    """tokens/s against streams, a line per server, a panel per prompt length."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lengths = result["load"]["prompt_tokens"]
    fig, axes = plt.subplots(1, len(lengths), figsize=(5 * len(lengths), 3.6), squeeze=False)
    for ax, length in zip(axes[0], lengths):
        for name, rows in result["results"].items():
            if name == "floor":
                continue
            points = [(r["streams"], r["tokens_per_s"]) for r in rows if r["prompt_tokens"] == length]
            ax.plot(*zip(*points), marker="o", label=name)
        ax.set(xscale="log", xlabel="concurrent streams", ylabel="tokens/s", title=f"prompts of {length} tokens")
        ax.set_xticks(result["load"]["streams"], [str(s) for s in result["load"]["streams"]])
        ax.grid(alpha=0.3)
    axes[0][0].legend()
    fig.suptitle(result["machine"]["processor"], fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main(checkpoint, machine: dict, json_path: Path, figure: Path, load: Load, source: Path | None,
         binary: Path | None) -> int:
    result = dict(model=checkpoint.describe(), machine=machine, **measure(checkpoint, load, source, binary))
    print(report(result))
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(result, indent=1))
    draw(result, figure)
    print(f"\nFigures written to {shown(json_path)}; drawn in {shown(figure)}")
    return 0
