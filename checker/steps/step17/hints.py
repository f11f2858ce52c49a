"""Step 17's hints, a ladder per part (`pixi run s17 --hint`), and the solution code each part checks
(`--solution`)."""

from checker.reporting.hinting import EARLIER, api

HINTS: dict[str, list[str]] = {
    "earlier": EARLIER,
    "kernel": ["Per query: keys 0 .. P + t, in tiles; keep m (from -infinity), l (from 0) and an accumulator (from "
               "0); when a tile's largest score beats m, scale l and the accumulator by exp(m - m_new) first.",
               "In Mojo: `exp` and `sqrt` from std.math; `p.unsafe_load[width=W](i)` reads W floats, "
               "`p.unsafe_store(i, v)` writes them; `sync_parallelize(task, n)` runs task(0) .. task(n - 1) on the "
               "CPU's threads (step 15's page has the rest). MAX's own flash attention, for comparison: "
               "https://github.com/modular/modular/tree/main/max/kernels/src/nn",
               "First store k[b, h, t] and v[b, h, t] at cache row P + t (every head, every t); then, per (b, h, t): "
               "s_j = q . k_cache[j] / sqrt(D) for j = 0 .. P + t; result = sum_j exp(s_j - m) v_j / sum_j "
               "exp(s_j - m), m the largest s_j."],
    "model": ["GPT2Flash is your step 13 model with two changes: the positions come from `past`, a tensor, and each "
              "block's attention is the kernel's, which also stores the new keys and values.",
              f"Tensor.arange ({api('Tensor.arange')}) plus past gives the positions; F.gather "
              f"({api('F.gather')}) their rows of wpe's weight; F.split ({api('F.split')}) c_attn's output; your step "
              "07's _split_heads and _merge_heads around the kernel.",
              "x = wte(ids) + gather(wpe.weight, arange(T) + past); per block: q, k, v = split(c_attn(ln_1(x))), "
              "heads = flash_attention(split_heads(q), split_heads(k), split_heads(v), cache[2i], cache[2i+1], past), "
              "x += c_proj(merge_heads(heads)); x += mlp(ln_2(x)); logits from ln_f(x[:, -1])."],
    "generate": ["As step 13's generate_with_cache, but the caches are made once, and past counts the positions "
                 "they hold.",
                 "Tensor.from_dlpack (https://docs.modular.com/max/api/python/generated/max.experimental.tensor."
                 "Tensor/#max.experimental.tensor.Tensor.from_dlpack) makes past, [1] int64, of a numpy array.",
                 "caches = empty_flash_cache(config, 1); past = 0; each call: logits = model(ids, past, *caches); "
                 "past += the ids' length; pick, yield, stop at eos; ids = [[token]]."],
    "int8": ["Optional, once step 16 passes: GPT2FlashQ8 is GPT2Flash for decode with step 16's int8 products: "
             "every Linear a QuantizedLinear, and the tied head through matvec_q8.",
             "Import step 16 inside GPT2FlashQ8.__init__ and head, not at the file's top (an import statement runs "
             "where it stands: https://docs.python.org/3/reference/simple_stmts.html#the-import-statement): the "
             "float32 path (and the check's earlier steps) must not need it. Make forward end with self.head(...), "
             "so that only the head changes.",
             "GPT2Flash's __init__ first, then swap each Linear of self.transformer and its descendants for "
             "QuantizedLinear(linear), as step 16's GPT2Quantized does; head_q, head_scales = quantized(wte.weight); "
             "head(last) = matvec_q8(last, head_q, head_scales)."],
    "timing": ["A report of speed, never a failure: what your kernel costs against step 13's attention.",
               f"At decode a layer reads its keys and values once: bandwidth is the limit (step 15's page; "
               f"{api('F.softmax')} for the attention it replaces).",
               "Split each head's keys between tasks when heads are fewer than threads; read each key once per band "
               "of queries at prefill."],
}

SOURCES: dict[str, str] = {"kernel": "flash_attention", "model": "GPT2Flash.forward", "generate": "generate_flash",
                           "int8": "GPT2FlashQ8", "timing": "GPT2Flash.forward"}
