"""Step 18's hints, a ladder per part (`pixi run s18 --hint`), and the solution code each part checks
(`--solution`)."""

from checker.reporting.hinting import EARLIER, api

MOJO_POINTERS = "https://docs.modular.com/mojo/manual/pointers/unsafe-pointers/"

HINTS: dict[str, list[str]] = {
    "earlier": EARLIER,
    "attention": ["Two passes: first store every new row's key and value at its position, then attend. Row r of "
                  "request b (input_row_offsets[b] <= r < input_row_offsets[b + 1]) sits at position p = "
                  "cache_lengths[b] + r - input_row_offsets[b]; it sees its request's positions 0 .. p.",
                  "Position p of request b lives in page lookup_table[b, p / PAGE], slot p % PAGE; its key for head h "
                  "starts at blocks[page, 0, layer, slot, h, 0], its value at blocks[page, 1, layer, slot, h, 0]: "
                  "((page x 2 + kv) x L + layer) x PAGE x H x D + (slot x H + h) x D floats in, read and written "
                  f"through blocks.unsafe_ptr() ({MOJO_POINTERS}).",
                  "Step 17's online softmax per (row, head), its keys read page by page: a tile never crosses a page. "
                  "Tasks: (request, head, band of rows); a decode batch whose heads leave threads idle splits each "
                  "head's keys, with ceil(S / splits) keys a split, combined as step 17 combines them."],
    "products": ["Each output y[m, n] is a dot product of x's row m and q's row n, scaled per block of 32 by "
                 "scales[n, k / 32], plus b[n].",
                 "Read each weight once for all rows of x: a task owns a group of q's rows and runs every row of x "
                 "past it, so the group stays in the core's cache; sums kept in SIMD registers "
                 "(https://docs.modular.com/mojo/std/builtin/simd/SIMD/), `sync_parallelize` over the groups.",
                 "Per group of NR rows of q and MR rows of x: for each block, turn NR x 32 int8 into floats times "
                 "their scale, multiply into MR x NR sums kept in registers."],
    "paged model": ["GPT2PagedQ8 is step 14's GPT2Paged with your kernels: paged_flash_attention for each block's "
                    "attention, every Linear's product matmul_q8 on its quantised weight and with its bias, and wte "
                    "int8 for the head (which has no bias) and for the embedding's rows alike.",
                    f"The embedding: F.gather ({api('F.gather')}) the int8 rows and their scales, then each "
                    "column times its block's scale (the skeleton says why not by reshaping into blocks).",
                    "x = embed(tokens) + gather(wpe.weight, ragged_positions(...)); per block: q, k, v = split("
                    "c_attn(ln_1(x))) reshaped [T, H, D], x += c_proj(paged_flash_attention(..., i) reshaped "
                    "[T, C]); x += mlp(ln_2(x)); logits = matmul_q8(ln_f(gather(x, rows)), head q, head scales)."],
    "served": ["GPT2PagedQ8 is step 14's GPT2Paged with your kernels: paged_flash_attention for each block's "
               "attention, every Linear's product matmul_q8 on its quantised weight, and wte int8 for the head and "
               "the embedding's rows alike.",
               "forward(tokens, kv_collection, input_row_offsets, rows): the rows are the ones whose logits the "
               f"server wants; gather them ({api('F.gather')}) after the last block, then ln_f and the head.",
               "The server runs every block, where the paged model part ran two: look at what changes with the block "
               "(its layer index), at the weights each Linear quantises, and at the embedding (the int8 table's "
               "rows, as the head reads them)."],
}

SOURCES: dict[str, str] = {"attention": "paged_flash_attention", "products": "matmul_q8",
                           "paged model": "GPT2PagedQ8.forward", "served": "GPT2PagedQ8"}
