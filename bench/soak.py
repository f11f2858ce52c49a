"""`python -m bench --soak ROUNDS`: step 14's server through the serving bench's levels of its shortest prompts, round
after round, each text against transformers' greedy ids; a fault that comes once in many rounds, found.

Step 14 serves float32, as transformers computes: on the stand-ins no greedy step of the bench's prompts is a near
tie (the synthetic one's two largest logits at least 0.0024 apart), so a text that differs is a fault, and each one
is placed (bench.servers.differing: the request, its first differing character, another request's text or not).
As `--serve --fast` runs it: the same prompts a level, the same pool (bench.servers.pool_for), the server stopped
(SIGSTOP) for PAUSE seconds after each level as the bench stops it while the other servers run. Exit status 1 if a
text differed. (The performance page's "Step 14's differing texts": 16 of 32 at sixteen streams, once in 7 rounds.)
"""

from __future__ import annotations

import os
import sys
import time

from bench.serve import served_level, transformers_level, whole_characters
from bench.servers import Load, alone, differing, level_prompts, pool_for
from runtime.paths import REPO
from runtime.server import Server

# torch and transformers are imported inside reference(): importing them takes seconds.

PAUSE = 5.0  # seconds a level's server is stopped after it


def reference(checkpoint, load: Load) -> tuple[dict, dict]:
    """Each level's requests (prompts of the shortest length, seeded as the bench seeds them) and transformers'
    greedy texts of the measured ones (after the warm-up's `streams`), batched `streams` at a time."""
    import torch
    from transformers import AutoTokenizer, GPT2LMHeadModel

    tokenizer = AutoTokenizer.from_pretrained(checkpoint.path)
    vocab = min(len(tokenizer), checkpoint.config()["vocab_size"])
    ids, length = whole_characters(tokenizer, vocab), min(load.prompt_tokens)
    torch.set_grad_enabled(False)
    hf = GPT2LMHeadModel.from_pretrained(checkpoint.path, dtype=torch.float32).eval()
    work, texts = {}, {}
    for s in load.streams:
        work[s] = level_prompts(ids, length, s)
        rest = work[s][s:]
        _, new = transformers_level(hf, vocab, [rest[i:i + s] for i in range(0, len(rest), s)], load.new_tokens)
        texts[s] = [tokenizer.decode(n, skip_special_tokens=True) for n in new]
    return work, texts


def main(checkpoint, rounds: int, load: Load) -> int:
    work, texts = reference(checkpoint, load)
    pool, _ = pool_for(load, checkpoint.config()["n_positions"])
    faults = 0
    with Server(REPO / "solutions" / "solution_14.py", checkpoint.path, max_batch_size=max(load.streams),
                pool_positions=pool) as server:
        group = os.getpgid(server.process.pid)
        for r in range(rounds):
            for s in load.streams:
                summary, runs = served_level(server.url, s, work[s], load.new_tokens)
                differ = differing([run.text for run in runs], texts[s])
                faults += bool(differ)
                print(f"round {r + 1}, {s} streams: {summary['tokens_per_s']:.1f} tokens/s, "
                      f"{len(runs) - len(differ)} of {len(runs)} texts transformers'"
                      + "".join(f"; request {d['request']} differs from character {d['first_differing_character']}"
                                + (f" (request {d['another_requests_text']}'s text)"
                                   if d["another_requests_text"] is not None else "") for d in differ), flush=True)
                with alone(None, [group]):  # continued however the pause ends, so the server can be stopped
                    time.sleep(PAUSE)
    print(f"{faults} of {rounds * len(load.streams)} levels had a text that differs.", file=sys.stderr)
    return 1 if faults else 0
