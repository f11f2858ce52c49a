"""`python -m bench.threads`: the served model at each scheduling policy of MAX's runtime threads, alone on the
machine and beside busy programs: runtime/threads.py's choice, measured again.

    python -m bench.threads          step 14's server (`pixi run serve`; ~25 min on 2 CPUs once compiled)
    python -m bench.threads --fast   step 18's (`pixi run serve --fast`)

One server; in each round, for each policy given to the model worker's runtime threads (MAX's own niceness 0,
runtime.threads.NICENESS, Linux's SCHED_IDLE) and each neighbourhood (none; a busy Python loop per CPU at
niceness 0, in a session of its own as another program would be): one stream, then sixteen, of 32-token prompts
and 32 new tokens, greedy (bench/serve.py's client: a warm-up round, then as many requests measured). The report
gives each cell's median tokens/s over the rounds. Setting a thread back to niceness 0 from outside takes the
right to raise a priority (root, or CAP_SYS_NICE).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import runtime
from bench.machine import cpu, neighbours
from bench.serve import prompts, served_level, whole_characters
from runtime.checkpoints import checkpoint_for_command
from runtime.paths import REPO
from runtime.server import Server, descendants
from runtime.threads import NICENESS, lowered

# transformers is imported inside main: importing it takes seconds.

POLICIES = {"niceness 0": (os.SCHED_OTHER, 0), f"niceness {NICENESS}": (os.SCHED_OTHER, NICENESS),
            "SCHED_IDLE": (os.SCHED_IDLE, 0)}
STREAMS = (1, 16)
PROMPT_TOKENS, NEW_TOKENS = 32, 32


def set_policy(tids: list[int], policy: int, niceness: int) -> None:
    for tid in tids:
        os.sched_setscheduler(tid, policy, os.sched_param(0))
        if policy != os.SCHED_IDLE:
            os.setpriority(os.PRIO_PROCESS, tid, niceness)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.threads", description=__doc__.split("\n\n")[0])
    parser.add_argument("--fast", action="store_true", help="step 18's server instead of step 14's")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of every policy and neighbourhood")
    args = parser.parse_args(argv)
    runtime.setup()
    if (checkpoint := checkpoint_for_command()) is None:
        return 2
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(checkpoint.path)
    ids = whole_characters(tokenizer, min(len(tokenizer), checkpoint.config()["vocab_size"]))
    step = "18" if args.fast else "14"
    name, vectors = cpu()
    print(f"step {step}'s server, {name} ({', '.join(vectors)}), {os.cpu_count()} CPUs, {checkpoint.describe()}")
    rates: dict[tuple[str, int, int], list[float]] = {}
    with Server(REPO / "solutions" / f"solution_{step}.py", checkpoint.path, max_batch_size=max(STREAMS)) as server:
        workers = lowered(descendants(server.process.pid))  # the process that runs the graph lowered its threads
        if not workers:  # a system that refused (runtime.threads leaves them so)
            print("no process of the server has its runtime threads at runtime.threads.NICENESS", file=sys.stderr)
            return 2
        tids = next(iter(workers.values()))
        for at in range(args.rounds):
            for policy, (kind, niceness) in POLICIES.items():
                try:
                    set_policy(tids, kind, niceness)
                except PermissionError:
                    print("setting a thread back to niceness 0 takes root or CAP_SYS_NICE", file=sys.stderr)
                    return 2
                for busy in (0, os.cpu_count()):
                    with neighbours(busy, own_session=True):
                        for streams in STREAMS:
                            count = streams + max(streams, 4)  # a warm-up round, then at least 4 measured
                            requests = prompts(ids, count, PROMPT_TOKENS, seed=100 * at + streams)
                            rate = served_level(server.url, streams, requests, NEW_TOKENS)[0]["tokens_per_s"]
                            rates.setdefault((policy, busy, streams), []).append(rate)
                            print(f"round {at + 1}, {policy}, {busy} busy neighbours, {streams} streams: "
                                  f"{rate:.1f} tokens/s", file=sys.stderr, flush=True)
    print("| runtime threads | busy neighbours | " + " | ".join(f"{s} streams, tokens/s" for s in STREAMS) + " |")
    print("| --- | --- |" + " --- |" * len(STREAMS))
    for policy in POLICIES:
        for busy in (0, os.cpu_count()):
            print(f"| {policy} | {busy} | "
                  + " | ".join(f"{statistics.median(rates[policy, busy, s]):.1f}" for s in STREAMS) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
