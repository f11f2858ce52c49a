"""What `python -m bench` prints: the side-by-side figures as a Markdown table and a few lines, `--context`'s
table, `--memory`'s lines."""

from __future__ import annotations

from bench.decoders import LABELS


def llama_line(llama: dict, decode: dict) -> str:
    """The llama.cpp line of the report: its Q8_0 decode against step 16's, or why it was not measured."""
    if "tokens_per_s" not in llama:
        return f"llama.cpp Q8_0: not measured: {llama.get('reason', 'not asked for')}."
    return (f"llama.cpp Q8_0 (the same checkpoint, converted by its convert_hf_to_gguf.py): "
            f"{llama['tokens_per_s']:.1f} tokens/s, {llama['speedup']:.2f}x transformers; step 16's int8 decode "
            f"{llama['int8_over_llama_cpp']:.2f}x llama.cpp's ({decode['int8_tokens_per_s']:.1f} tokens/s)"
            + (f"; step 17's with int8 products (gpt2 --fast) {llama['fast_over_llama_cpp']:.2f}x "
               f"({decode['fast_tokens_per_s']:.1f} tokens/s)" if "fast_over_llama_cpp" in llama else "") + "."
            + (f" ({llama['note']}.)" if "note" in llama else ""))


def report(result: dict) -> str:
    """The figures as a Markdown table and a few lines."""
    m, d, mem = result["machine"], result["decode"], result["memory"]
    lines = [f"{m['processor']} ({', '.join(m['vector_extensions']) or 'no vector extensions listed'}), "
             f"{m['cpus']} CPUs (torch threads {m['torch_threads']})",
             f"{result['model']}, float32, median of {result['repeats']} runs after a warm-up",
             "", "| measure | batch | tokens | MAX | transformers | speed-up (transformers / MAX time) |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in result["prefill"]:
        lines.append(f"| prefill latency | {r['batch']} | {r['tokens']} | {r['max_ms']:.1f} ms | "
                     f"{r['transformers_ms']:.1f} ms | {r['speedup']:.2f}x |")
    lines.append(f"| greedy decode | 1 | {d['prompt']} + {d['steps']} | {d['max_tokens_per_s']:.1f} tokens/s | "
                 f"{d['transformers_tokens_per_s']:.1f} tokens/s | {d['speedup']:.2f}x |")
    lines.append(f"| greedy decode with step 15's Mojo kernel | 1 | {d['prompt']} + {d['steps']} | "
                 f"{d['kernel_tokens_per_s']:.1f} tokens/s | {d['transformers_tokens_per_s']:.1f} tokens/s | "
                 f"{d['kernel_speedup']:.2f}x |")
    lines.append(f"| greedy decode on int8 weights, step 16's kernel | 1 | {d['prompt']} + {d['steps']} | "
                 f"{d['int8_tokens_per_s']:.1f} tokens/s | {d['transformers_tokens_per_s']:.1f} tokens/s | "
                 f"{d['int8_speedup']:.2f}x |")
    for what, key in (("step 17's FlashAttention", "flash"), ("step 17's FlashAttention + int8 (gpt2 --fast)", "fast")):
        if f"{key}_tokens_per_s" in d:
            lines.append(f"| greedy decode, {what} | 1 | {d['prompt']} + {d['steps']} | "
                         f"{d[f'{key}_tokens_per_s']:.1f} tokens/s | {d['transformers_tokens_per_s']:.1f} tokens/s | "
                         f"{d[f'{key}_speedup']:.2f}x |")
    same = result["tokens"]["identical"]
    lines += ["", f"Greedy tokens, MAX with its KV cache vs transformers (its decode loop and generate()): "
                  f"{'identical' if same else 'DIFFERENT'} ({len(result['tokens']['max_kv_cache'])} tokens).",
              f"Memory: read bandwidth {mem['read_bandwidth_gb_s']:.1f} GB/s, weights read per token "
              f"{mem['weight_mb_per_token']:.0f} MB -> limit {mem['limit_tokens_per_s']:.1f} tokens/s; "
              f"MAX decodes at {100 * mem['max_fraction_of_limit']:.0f}% of it, transformers at "
              f"{100 * mem['transformers_fraction_of_limit']:.0f}%; with step 15's kernel MAX decodes at "
              f"{100 * mem['kernel_fraction_of_limit']:.0f}% ({'same' if d['kernel_same_tokens'] else 'OTHER'} "
              "tokens as transformers' generate).",
              f"int8 (step 16): {mem['int8_mb_per_token']:.0f} MB per token, read at "
              f"{100 * mem['int8_fraction_of_limit']:.0f}% of the bandwidth; {d['int8_over_kernel']:.2f}x step 15's "
              f"float32 kernel ({'same' if d['int8_same_tokens'] else 'OTHER'} tokens as transformers' generate on "
              "the same dequantised weights).",
              (f"Step 17: FlashAttention decodes the {'same' if d['flash_same_tokens'] else 'OTHER'} tokens as "
               f"transformers' generate; with int8 products {d['fast_over_int8']:.2f}x step 16's int8 decode "
               f"({'same' if d['fast_same_tokens'] else 'OTHER'} tokens as transformers on the dequantised weights)."
               if "flash_tokens_per_s" in d else "Step 17: not measured (its kernel is GPT-2's: head_dim 64)."),
              llama_line(result.get("llama_cpp", {}), d),
              f"Largest |logit difference| in the prefill rows: "
              f"{max(r['max_abs_diff'] for r in result['prefill']):.1e}."]
    if "matvecs" in result:
        mv, bw = result["matvecs"], mem["read_bandwidth_gb_s"]
        lines += ["", "| weight product, alone (batch 1) | per token | MAX ms | MAX reads at | kernel ms | "
                      "kernel reads at |", "| --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {r['name']} {r['shape']} | {r['per_token']} | {r['ms']:.2f} | {r['gb_s']:.1f} GB/s | "
                  f"{r['kernel_ms']:.2f} | {r['kernel_gb_s']:.1f} GB/s |" for r in mv]
        for side, key, tps in (("MAX's", "ms", d["max_tokens_per_s"]), ("the kernel's", "kernel_ms",
                                                                         d["kernel_tokens_per_s"])):
            products, step_ms = sum(r[key] * r["per_token"] for r in mv), 1e3 / tps
            lines.append(f"{side[0].upper()}{side[1:]} products alone: {products:.1f} ms per token of its decode "
                         f"step's {step_ms:.1f} ms ({100 * products / step_ms:.0f}%); the rest is the small ops "
                         "and the call.")
        mb = mem["weight_mb_per_token"]
        lines.append(f"Reading {mb:.0f} MB at the measured {bw:.1f} GB/s takes {mb / bw:.1f} ms.")
    if "int8_split" in result:
        s, mb = result["int8_split"], mem["int8_mb_per_token"]
        lines += ["", f"| an int8 decode step at {s['past']} cached positions (solution 16) | ms |", "| --- | --- |",
                  f"| with step 13's attention (F.concat grows the cache; the mask) | {s['before_ms']:.2f} |",
                  f"| as the solution runs it (its append kernel; no mask) | {s['step_ms']:.2f} |",
                  f"| its 49 products alone, in one graph | {s['products_ms']:.2f} |",
                  f"| the rest of the step, before and after | {s['before_ms'] - s['products_ms']:.2f}, "
                  f"{s['step_ms'] - s['products_ms']:.2f} |"]
        lines.append(f"Reading {mb:.0f} MB at the measured {mem['read_bandwidth_gb_s']:.1f} GB/s takes "
                     f"{mb / mem['read_bandwidth_gb_s']:.1f} ms.")
    if "fast_split" in result:
        f = result["fast_split"]
        lines += ["", f"| a gpt2 --fast decode step at {f['past']} cached positions (solution 17 + int8) | ms |",
                  "| --- | --- |", f"| the step | {f['step_ms']:.2f} |",
                  f"| its 49 int8 products alone, in one graph | {f['products_ms']:.2f} |",
                  f"| its 12 attentions alone (solution 17's kernel) | {f['attention_ms']:.2f} |",
                  f"| its 25 layer norms, 12 GELUs, 24 adds alone | {f['small_ms']:.2f} |",
                  f"| the step less the three (embeddings, the heads' reshapes, the calls between ops; each part "
                  f"alone pays a graph call's own cost too, so this may fall below zero) | {f['rest_ms']:.2f} |"]
    return "\n".join(lines)


def context_report(rates: dict[str, list[float]], contexts, m: dict) -> str:
    """The --context table: tokens/s of each decoder after each context length, and the ratios to llama.cpp."""
    lines = [f"{m['processor']} ({', '.join(m['vector_extensions'])}), {m['cpus']} CPUs",
             "", "| decoder | " + " | ".join(f"P = {c}" for c in contexts) + " |",
             "| --- |" + " --- |" * len(contexts)]
    lines += [f"| {name} | " + " | ".join(f"{v:.1f}" for v in values) + " |" for name, values in rates.items()]
    if (llama := rates.get(LABELS["llama_cpp"])) is not None:
        fast = rates[LABELS["fast"]]
        lines.append("\ngpt2 --fast / llama.cpp: " + ", ".join(f"{a / b:.2f}x at P = {c}"
                                                                for a, b, c in zip(fast, llama, contexts)))
    return "\n".join(lines)


def memory_report(found: dict | None) -> int:
    """Prints --memory's figures; 0, or 1 when they could not be measured here."""
    if found is None:
        print("--memory reads Linux's peak resident memory (/proc/self/clear_refs): not here.")
        return 1
    above = found["above_output_mb"]
    print(f"A prefill of {found['positions']} positions through one layer's attention, the first call of each in "
          f"this process: memory at its peak beyond its output ({found['output_mb']:.1f} MB):")
    for name, mb in above.items():
        print(f"  {name}: {mb:.1f} MB")
    print(f"One layer's scores [1, H, T, T] in float32 are {found['scores_mb']:.1f} MB.")
    return 0
