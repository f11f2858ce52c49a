"""`pixi run bench`: the course's GPT-2 on MAX against transformers' GPT-2, measured side by side.

    python -m bench                  GPT-2 small (the real checkpoint if downloaded, else the synthetic one)
    python -m bench --tiny           a 2-layer GPT-2 made here with transformers: seconds (the test suite runs it)
    python -m bench --profile        also each weight product alone (MAX's, step 15's kernel) and the int8 step's
                                     split (bench/matvec.py)
    python -m bench --checks         how long each step's check takes, cold and warm (bench/checks.py)
    python -m bench --serve          max serve at 1, 4 and 16 concurrent streams vs transformers (bench/serve.py)
    python -m bench --serve --tiny   the same at 1 and 2 streams, 8 tokens each: the machinery, quickly
    python -m bench --serve --fast   step 18's server against step 14's, llama.cpp's llama-server (--llama-cpp SRC
                                     --llama-server BINARY) and transformers at 1, 4, 16 and 32 streams, prompts
                                     of 32 and 512 tokens (bench/servers.py; --figure, default .cache/serving.png)
    python -m bench --soak ROUNDS    step 14's server through --serve --fast's levels of 32-token prompts ROUNDS
                                     times, each text against transformers' (bench/soak.py; --tiny: 8 tokens)
    python -m bench --again REPEATS  step 14's served graph (--fast: step 18's) decoding the same 32 requests REPEATS
                                     times, each time's logits against the first's (bench/again.py; --busy: a
                                     busy loop on every CPU beside it; --tiny: a 2-layer GPT-2, 4 requests)
    python -m bench --decode-split   where a decode step of step 18's served graph goes at 1 to 32 requests, and a
                                     prefill of 1 to 16 prompts of 512: products, attention, the rest;
                                     a product's call beside its bytes (bench/served_split.py)
    python -m bench --json out.json  where to write the figures (default .cache/bench.json)
    python -m bench --llama-cpp SRC  also llama.cpp's Q8_0 decode (bench/llama.py; SRC a llama.cpp source tree)
    python -m bench --context        every decoder's tokens/s against the context length, drawn as a PNG
                                     (bench/flash.py; --figure PATH, default .cache/decode-by-context.png)
    python -m bench --memory         the memory a prefill of the whole context takes in one layer's attention,
                                     step 17's kernel against step 13's stored scores (bench/flash.py)

In one process, on the same token ids, float32 on the CPU, both sides with the same threads:
  MAX           the course's step 13 solution: GPT2WithCache around solution 11's loaded model, one
                compiled graph (bench/kv_cache.py drives it)
  transformers  GPT2LMHeadModel, PyTorch eager, its default attention (sdpa), its own cache
  prefill       the prompt pass of generation: every position through the model, the cache
                filled, logits of the last position (transformers: use_cache=True, logits_to_keep=1)
  decode        greedy, batch 1: each step feeds one token and reads the cache; tokens/s over the steps
Each figure is the median of --repeats runs after a warm-up run; speed-up = transformers time / MAX time.
The greedy tokens of both sides (and of the kernels' decodes: step 15's against transformers, step 16's int8
against transformers on the same dequantised weights) are compared, the exit status 1 if any differ, and the
decode speed set against the memory-bandwidth limit (runtime/bandwidth.py), measured in the same
run. The decodes (MAX, transformers, MAX with step 15's kernel, MAX on int8 weights with step 16's) and the
bandwidth are measured in rounds, one of each per round, so their ratios are taken under the same load.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

import runtime
from bench import again, serve, served_split, servers, soak
from bench.checks import main as checks
from bench.decoders import TINY_CONFIG, hf_tiny, int8_model
from bench.flash import CONTEXTS, FLASH_HEAD_DIM, fast_split, prefill_memory
from bench.machine import machine
from bench.matvec import int8_split, time_matvecs
from bench.measure import FULL, TINY, Plan, context, measure
from bench.report import context_report, memory_report, report
from runtime.checkpoints import checkpoint_for_command, learner_config
from runtime.paths import CACHE, shown


def main(argv: list[str] | None = None) -> int:
    """Runs the mode the command line asks for; its exit status (the default run's: 1 if a decode's tokens
    differ from transformers')."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--tiny", action="store_true", help="a 2-layer GPT-2: seconds instead of minutes")
    parser.add_argument("--checks", action="store_true", help="time every step's check, cold and warm")
    parser.add_argument("--profile", action="store_true", help="also time each weight product alone (decode)")
    parser.add_argument("--serve", action="store_true", help="max serve at 1/4/16 streams against transformers")
    parser.add_argument("--repeats", type=int, default=None, help="runs per figure after the warm-up")
    parser.add_argument("--json", type=Path, default=None, help="where to write the figures (default .cache/)")
    parser.add_argument("--context", action="store_true", help="decode tokens/s against the context length, every "
                        "decoder, drawn as a PNG (--figure)")
    parser.add_argument("--figure", type=Path, default=None, help="where --context (default "
                        ".cache/decode-by-context.png) or --serve --fast (.cache/serving.png) draws")
    parser.add_argument("--fast", action="store_true", help="with --serve: step 18's server against step 14's, "
                        "llama-server's and transformers'")
    parser.add_argument("--llama-server", type=Path, default=None, metavar="BINARY",
                        help="with --serve --fast: llama.cpp's llama-server, built from the --llama-cpp tree")
    parser.add_argument("--decode-split", action="store_true", help="step 18's served decode step at 1 to 32 "
                        "requests and prefill of 1 to 16 prompts of 512: products, attention, the rest; "
                        "a product's call")
    parser.add_argument("--soak", type=int, default=None, metavar="ROUNDS", help="step 14's server through "
                        "--serve --fast's shortest prompts ROUNDS times, each text against transformers'")
    parser.add_argument("--again", type=int, default=None, metavar="REPEATS", help="step 14's served graph (--fast: "
                        "18's) decoding the same batch REPEATS times: does it answer alike?")
    parser.add_argument("--busy", action="store_true", help="with --again: a busy loop on every CPU beside it")
    parser.add_argument("--memory", action="store_true", help="the memory of a prefill through one layer's "
                        "attention, step 17's kernel against step 13's scores")
    parser.add_argument("--llama-cpp", type=Path, default=None, metavar="SOURCE",
                        help="also llama.cpp's Q8_0 decode (llama-cpp-python installed; SOURCE: a llama.cpp tree)")
    args = parser.parse_args(argv)
    if args.checks:
        return checks()
    if args.soak is not None:
        if args.soak < 1:
            parser.error("--soak takes the rounds to run: 1 or more")
        if (checkpoint := checkpoint_for_command()) is None:
            return 2
        runtime.setup()
        return soak.main(checkpoint, args.soak, servers.TINY if args.tiny else servers.FULL)
    if args.again is not None and args.again < 2:
        parser.error("--again takes how many times to decode the batch: 2 or more")
    if args.serve:
        if (checkpoint := checkpoint_for_command()) is None:
            return 2
        if args.fast:
            runtime.setup()
            return servers.main(checkpoint, machine(), args.json or CACHE / "bench-servers.json",
                                args.figure or CACHE / "serving.png", servers.TINY if args.tiny else servers.FULL,
                                args.llama_cpp, args.llama_server)
        return serve.main(checkpoint, machine(), args.json or CACHE / "bench-serve.json",
                          serve.TINY if args.tiny else serve.FULL)

    runtime.setup()

    plan = TINY if args.tiny else FULL
    if args.repeats:
        plan = Plan(plan.prefill, plan.decode_prompt, plan.decode_steps, args.repeats)
    with tempfile.TemporaryDirectory() as tmp:
        if args.tiny:
            folder, model = (hf_tiny(Path(tmp)),
                             f"tiny GPT-2 ({TINY_CONFIG['n_layer']} layers, width {TINY_CONFIG['n_embd']})")
        else:
            if (checkpoint := checkpoint_for_command()) is None:
                return 2
            folder, model = checkpoint.path, checkpoint.describe()
        config = learner_config(json.loads((folder / "config.json").read_text()))
        if args.memory:
            return memory_report(prefill_memory(config))
        if (args.decode_split or args.again and args.fast) and config.n_embd // config.n_head != FLASH_HEAD_DIM:
            print(f"{'--decode-split' if args.decode_split else '--again --fast'} runs step 18's kernels, written for "
                  f"heads of {FLASH_HEAD_DIM}: not {model}")
            return 2
        if args.again is not None:
            return again.main(folder, config, args.again, args.fast, args.busy,
                              **(dict(batch=4, steps=8) if args.tiny else {}))
        if args.decode_split:
            return served_split.main(folder, config, machine(), args.json or CACHE / "bench-decode-split.json")
        if args.context:
            info, figure = machine(), args.figure or CACHE / "decode-by-context.png"
            result = dict(model=model, machine=info, **context(folder, config, args.llama_cpp, figure, info))
            print(context_report(result["tokens_per_s"], CONTEXTS, info))
            if "reason" in result["llama_cpp"] and result["llama_cpp"]["reason"]:
                print(f"llama.cpp Q8_0: not measured: {result['llama_cpp']['reason']}.")
            if "note" in result["llama_cpp"]:
                print(f"({result['llama_cpp']['note']}.)")
            path = args.json or CACHE / "bench-context.json"
            path.write_text(json.dumps(result, indent=1))
            print(f"\nFigure drawn in {shown(figure)}; figures written to {shown(path)}")
            return 0
        result = dict(model=model, repeats=plan.repeats, plan=asdict(plan), machine=machine(),
                      **measure(folder, config, plan, args.llama_cpp))
        if args.profile:
            result["matvecs"] = time_matvecs(config)
            result["int8_split"] = int8_split(int8_model(folder, config), config)
            if config.n_embd // config.n_head == FLASH_HEAD_DIM:
                result["fast_split"] = fast_split(folder, config)
    print(report(result))
    path = args.json or CACHE / "bench.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1))
    print(f"\nFigures written to {shown(path)}")
    decode = result["decode"]
    same = ("kernel_same_tokens", "int8_same_tokens", "flash_same_tokens", "fast_same_tokens")
    return 0 if result["tokens"]["identical"] and all(decode.get(key, True) for key in same) else 1


if __name__ == "__main__":
    sys.exit(main())
