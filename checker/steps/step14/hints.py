"""Step 14's hints, a ladder per part (`pixi run s14 --hint`), and the solution code each part checks
(`--solution`)."""

from checker.reporting.hinting import EARLIER, api

HINTS: dict[str, list[str]] = {
    "earlier": EARLIER,
    "ragged": ["A row's position is its request's cached count plus how far the row is into its request's "
               "new rows: find each row's request, then where that request starts.",
               f"Tensor.arange ({api('Tensor.arange')}) takes a symbolic length; F.gather "
               f"({api('F.gather')}) reads one entry per row; F.cast ({api('F.cast')}) turns uint32 into int64.",
               "owner of row t = how many request ends (offsets[1:]) are <= t; then start = offsets[owner], "
               "cached = cache_lengths[owner]."],
    "paged": ["Attention is the only place requests could see each other: the kernel keeps each request to "
              "its own pages; your part is what goes in (q, k, v per head), where (this layer) and how "
              "(causal, GPT-2's scale); then step 13's model, row by row.",
              "max.nn.kernels: store_k_cache_ragged / store_v_cache_ragged write [T, H, D]; "
              "flash_attention_ragged(kv_params, q, input_row_offsets, kv_collection, layer_idx, mask_variant, "
              f"scale) attends (https://docs.modular.com/max/api/python/nn/kernels/); F.gather "
              f"({api('F.gather')}) picks rows.",
              "layer_idx = a uint32 scalar Tensor equal to the block's index; MHAMaskVariant.CAUSAL_MASK; "
              "scale 1 / sqrt(head_dim); then ln_f and the tied head on every row, as step 11 does."],
    "last": ["Request b's rows run from offsets[b] up to, not including, offsets[b + 1].",
             f"Slicing a Tensor (offsets[1:]) and F.cast ({api('F.cast')}) to int64.",
             "The row before each offsets[1:]: offsets[1:] - 1, as int64."],
    "served": ["The served model is your GPT2Paged with all blocks: what passes above serves; a difference "
               "here is in what max serve hands your model that the check's batches did not.",
               "max serve's log for the check's server is in .cache/serve-<port>.log; `pixi run serve` "
               "serves your model by hand (https://docs.modular.com/max/cli/serve/).",
               "Send the request the check lists as failing to `pixi run serve` with curl, and compare "
               "with `pixi run gpt2` on the same prompt."],
}

SOURCES: dict[str, str] = {"ragged": "ragged_positions", "last": "last_rows", "paged": "GPT2Paged.forward",
       "served": "paged_attention"}
