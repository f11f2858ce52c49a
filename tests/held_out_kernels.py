"""Mistakes in steps 15-18's kernels and in the Python around them that no catalogue lists, written by
someone who had read the skeletons and the book but never the checks or the tests; each with the piece a
right diagnosis must place it in and what a right message would say (`piece`, `expect`: written down before
the mistake was first run), and the words, one of which a failing line must hold (`cause`: the piece as the
checks word it). tests/test_held_out_kernels.py makes each in a copy of the solution and runs the check.
Of the 53 written for steps 15-17, one (np.tile for np.repeat in dequantize) was the catalogue's scales-tiled in
other words and is left out. Step 18's 18 were written the same way, on an AVX2 CPU (its products' paths are
that CPU's: the few-rows `row` below 8 rows, int8 x int8 with x taking w's sign). Run first, 3 passed (an MLP
normalised by ln_1, wte's float rows embedded, every bias dropped: the model was held to its rounded reference), 2
were told wrongly or not at all (x scaled by max|x| / 128 read as "no x gives your outputs"; the scales' row
stride on a K no multiple of 32 given no reading), and 4 were placed by the rows they were off on only, not by
what those rows computed (a band's head offset and scale, the decode bound, values read from the keys). Nine
more for step 18 come last (see there), after two more for step 17 (a tile's partial vector of keys left out of
the sums, told as the catalogue's last tile without saying the tile was 16 keys; an output stored at head % H, read
as bounds on keys from the rows a race left); and six after those for steps 15-17 (a third round's, placed since by
a reading each: right only below one whole vector or block, or on queries of one key; a decode case of 7 heads; the
learner's other custom op named when the decode is off with MAX's products in place); then bands sized for more
tasks than are started and y stored with K for M (a third round's, read since by the two counts and by where
the right outputs landed), and three that crash, last.
Seven more come after those, from a fourth round: step 16's ties rounded half up (passed as "equal"), step 17's
combine maximum started at 0 (passed: no case split a head's keys with every score far below 0), its rescale
factor's sign and its bands counted rounded down (told as a race), and three of step 18's products (a leftover
loop summing blocks again, x's row stride in bytes, a prompt's rows quantised by tile counts: passed). On an AVX2
CPU two of step 18's passed again (a band storing all its lanes, the rows quantised by tile counts: there the next
request's task stored its rows last, and c_attn's tiles outnumbered the rows) until the check gained a short band
as the slowest task and a product with more rows of x than tiles.

Held(step, name, file, old, new, piece, expect, cause, needs): `file` "py" for solutions/solution_NN.py, else the
kernel's file in solutions/solution_NN_kernel/; `old` occurs there exactly once (a tuple: edits in turn).
`needs`: a CPU flag the mistake needs to be one (step 18's vector of bytes holds two blocks only with VNNI's 512
bits; on AVX2 a vector's index is its block's, and the edit changes nothing).
"""

from __future__ import annotations

from typing import NamedTuple


class Held(NamedTuple):
    step: str
    name: str
    file: str
    old: str | tuple[str, ...]
    new: str | tuple[str, ...]
    piece: str
    expect: str
    cause: tuple[str, ...]
    needs: str = ""  # a CPU flag (as /proc/cpuinfo names it) without which the edit computes what the solution does


HELD = [
    Held('15', 'band-size-floor', 'matvec.mojo',
         'var per_task = ((M + TASKS - 1) // TASKS + ROWS - 1) // ROWS * ROWS',
         'var per_task = M // TASKS',
         "kernel: the band size per task (how w's rows are split between tasks)",
         ('The last outputs of y (the last M % 8 rows of w) are never computed: the band per task '
          'is M // TASKS rounded down, so the tasks together cover fewer than M rows. Shapes whose '
          'M is a multiple of the task count pass; look at how many rows each task owns (round up).'),
         ('last outputs of M', 'band')),
    Held('15', 'band-end-off-by-one', 'matvec.mojo',
         'var end = min((task + 1) * per_task, M)',
         'var end = min((task + 1) * per_task, M - 1)',
         'kernel: the end of the last band (the last row of w)',
         ("Only the last output column (y[:, M-1], w's last row) is wrong or missing: the bands "
          "stop one row short of M. Look at where the last task's band ends."),
         ('last outputs of M', 'band')),
    Held('15', 'x-vector-row-0', 'matvec.mojo',
         'var xv = xp.unsafe_load[width=WIDTH](n * K + k)',
         'var xv = xp.unsafe_load[width=WIDTH](k)',
         "kernel: x's row offset (n * K) in the vector loop",
         ("With one row of x everything is right; with several rows, every row's whole-vector part "
          "is computed from x's first row (only the tail columns use the right row). The load of x "
          'in the vector loop ignores the row n.'),
         ('rows of x',)),
    Held('15', 'y-stored-transposed', 'matvec.mojo',
         'yp[unsafe_offset=n * M + m + r] = s + bp[unsafe_offset=m + r]',
         'yp[unsafe_offset=(m + r) * N + n] = s + bp[unsafe_offset=m + r]',
         "kernel: where an output is stored in y (y's row stride)",
         ('Right with one row of x, scrambled with several: y[n, m] is stored at m * N + n, i.e. y '
          "is written as [M, N] (transposed). y's row n starts at n * M."),
         ('n * M',)),
    Held('15', 'tail-from-column-0', 'matvec.mojo',
         'for j in range(k, K):  # the tail: K % WIDTH columns left',
         'for j in range(K % WIDTH):  # the tail: K % WIDTH columns left',
         "kernel: the tail loop's columns (the K % width columns after the last whole vector)",
         ('Wrong whenever K is no multiple of the vector width (and K is at least one vector): the '
          'tail loop goes over the first K % width columns again instead of the last ones, so those'
          ' are counted twice and the last columns never. The tail must start where the vector loop'
          ' stopped.'),
         ('tail of K',)),
    Held('15', 'bias-in-tail-loop', 'matvec.mojo',
         ('s += wp[unsafe_offset=(m + r) * K + j] * xp[unsafe_offset=n * K + j]',
          'yp[unsafe_offset=n * M + m + r] = s + bp[unsafe_offset=m + r]'),
         (('s += wp[unsafe_offset=(m + r) * K + j] * xp[unsafe_offset=n * K + j] + '
           'bp[unsafe_offset=m + r]'),
          'yp[unsafe_offset=n * M + m + r] = s'),
         'kernel: where the bias b[m] is added (once per output)',
         ('The bias is added once per tail column instead of once per output: K % width times '
          "(never when K is a multiple of the vector width, as in GPT-2's products, several times "
          'on small K). The output is off by a multiple of b; add b[m] once, after the sum.'),
         ('bias',)),
    Held('15', 'bias-row-of-band-start', 'matvec.mojo',
         'yp[unsafe_offset=n * M + m + r] = s + bp[unsafe_offset=m + r]',
         'yp[unsafe_offset=n * M + m + r] = s + bp[unsafe_offset=m]',
         'kernel: the bias index (b[m + r])',
         ('The products are right but the bias is wrong: every row of a pass of 4 rows gets the '
          "bias of the pass's first row (b[m] instead of b[m + r]). y - x @ w.T equals b repeated "
          'in groups of four.'),
         ('bias',)),
    Held('15', 'acc-not-reset-per-pass', 'matvec.mojo',
         (('            while m < end:\n                var rows = min(ROWS, end - m)  # ROWS, or '
           'fewer at the end of w\n                for n in range(N):\n                    var acc = '
           'Array[SIMD[DType.float32, WIDTH], ROWS](fill=0)\n'),),
         (('            var acc = Array[SIMD[DType.float32, WIDTH], ROWS](fill=0)\n            while '
           'm < end:\n                var rows = min(ROWS, end - m)  # ROWS, or fewer at the end of w'
           '\n                for n in range(N):\n'),),
         "kernel: the accumulators' reset (acc zeroed once per band instead of once per pass/row)",
         ('The accumulators start at zero only once per task: each pass of rows (and each row of x)'
          ' adds to what the previous passes summed, so outputs include the sums of earlier rows of'
          ' the same band; only the first rows of each band are right. Reset acc for every output.'),
         ('accumulator', 'pass of rows')),
    Held('15', 'advance-by-width', 'matvec.mojo',
         '                m += ROWS\n',
         '                m += WIDTH\n',
         'kernel: the step from one pass of rows to the next (ROWS, not the vector width)',
         ('Most rows of w are never computed: after each pass of 4 rows the band jumps ahead by the'
          ' SIMD width (16 or 8), skipping the rows in between, whose outputs stay unwritten. The '
          'pass advances by the rows it computed.'),
         ('pass of rows', 'how far the next one moves')),
    Held('15', 'vector-loop-overruns-row', 'matvec.mojo',
         "while k + WIDTH <= K:  # whole vectors of x's row",
         "while k < K:  # whole vectors of x's row",
         "kernel: the vector loop's bound (a last vector reading past the row's end)",
         ('Wrong (or NaN) whenever K is no multiple of the vector width: the vector loop takes a '
          'last, partial vector that reads past the end of the row, into the next row of w (and '
          "past the end of x). Only whole vectors may be loaded; the rest is the scalar tail's."),
         ('one vector too far',)),
    Held('15', 'one-task-short', 'matvec.mojo',
         'sync_parallelize(band, TASKS)',
         'sync_parallelize(band, TASKS - 1)',
         'kernel: the number of tasks launched (the last band never runs)',
         ("The last band of w's rows is never computed: the kernel launches one task fewer than the"
          ' bands it cut, so the last outputs of y are missing (unwritten) while the others are '
          'exact.'),
         ('last outputs of M', 'band')),
    Held('15', 'tail-reads-band-first-row', 'matvec.mojo',
         's += wp[unsafe_offset=(m + r) * K + j] * xp[unsafe_offset=n * K + j]',
         's += wp[unsafe_offset=m * K + j] * xp[unsafe_offset=n * K + j]',
         "kernel: the tail's row of w ((m + r) * K)",
         ('Wrong when K is no multiple of the vector width: the tail columns of every row in a pass'
          " of 4 are read from the pass's first row of w (m * K instead of (m + r) * K). Rows m + 1"
          " .. m + 3 get row m's tail."),
         ('tail of K',)),
    Held('15', 'position-one-ahead', 'py',
         'x = t.wte(input_ids) + t.wpe(input_ids.shape[-1], cache[0].shape[-2])  # [B, 1, C]',
         'x = t.wte(input_ids) + t.wpe(input_ids.shape[-1], cache[0].shape[-2] + 1)  # [B, 1, C]',
         "model: the new token's position embedding (position P, not P + 1)",
         ("The decode steps' logits are off from the first decode step on, while the kernel itself "
          'is right: the new token gets the position embedding of P + 1 instead of P (the cache '
          'already holds positions 0 .. P-1). Look at the offset given to wpe.'),
         ('embeddings',)),
    Held('15', 'cache-index-per-layer', 'py',
         ('attended, key, value = attention_with_cache(block.attn, block.ln_1(x), cache[2 * i], '
          'cache[2 * i + 1])'),
         ('attended, key, value = attention_with_cache(block.attn, block.ln_1(x), cache[i], cache[i'
          ' + 1])'),
         'model: which cache tensors a block reads (2i and 2i+1, keys then values)',
         ("Block 0 is right, every later block attends over another layer's cache (and over values "
          "as keys): each layer has two caches, so layer i's are cache[2i] and cache[2i+1]. Decode "
          'logits differ from the first decode step.'),
         ("block 1's attention half",)),
    Held('15', 'past-key-value-swapped', 'py',
         ('attended, key, value = attention_with_cache(block.attn, block.ln_1(x), cache[2 * i], '
          'cache[2 * i + 1])'),
         ('attended, key, value = attention_with_cache(block.attn, block.ln_1(x), cache[2 * i + 1],'
          ' cache[2 * i])'),
         'model: the cached keys and values handed to attention (swapped)',
         ("Every block's decode attention scores the new query against the cached values and mixes "
          'the cached keys: the past key and value caches are passed in the wrong order (the cache '
          "is keys then values per layer). The kernel is right; the decode steps' logits are not."),
         ("block 0's attention half",)),
    Held('15', 'mlp-uses-ln-1', 'py',
         '            x = x + block.mlp(block.ln_2(x))\n            new_cache += [key, value]',
         '            x = x + block.mlp(block.ln_1(x))\n            new_cache += [key, value]',
         'model: the MLP half of each block, its LayerNorm (ln_2)',
         ("The decode steps' logits are wrong in every block's MLP half: the MLP's input is "
          "normalised with ln_1's weight and bias instead of ln_2's. The attention half and the "
          'kernel are right.'),
         ("block 0's MLP", 'ln_2')),
    Held('15', 'attention-input-not-normalised', 'py',
         ('attended, key, value = attention_with_cache(block.attn, block.ln_1(x), cache[2 * i], '
          'cache[2 * i + 1])'),
         ('attended, key, value = attention_with_cache(block.attn, x, cache[2 * i], cache[2 * i + '
          '1])'),
         "model: the attention half's input (ln_1 skipped before c_attn)",
         ("Each block's attention reads the raw residual stream instead of ln_1 of it, so the "
          "decode step's queries, keys and values (and the cache it returns) are wrong from block 0"
          ' on. Put ln_1 back before the attention.'),
         ("block 0's ln_1", "block 0's attention half")),
    Held('16', 'scales-read-transposed', 'matvec_q8.mojo',
         ('acc = block.fma(SIMD[DType.float32, WIDTH](sp[unsafe_offset=m * KB + j]), acc)',
          's += tail * sp[unsafe_offset=m * KB + whole]'),
         ('acc = block.fma(SIMD[DType.float32, WIDTH](sp[unsafe_offset=j * M + m]), acc)',
          's += tail * sp[unsafe_offset=whole * M + m]'),
         "kernel: the scales' indexing (scales is [M, KB], row m at m * KB)",
         ("Every block is multiplied by another weight row's scale: scales are read as if stored "
          '[KB, M] (j * M + m) instead of [M, KB] (m * KB + j). The int8 sums are right; the scale '
          'of block j of row m is scales[m, j].'),
         ('[KB, M]',)),
    Held('16', 'every-block-first-scale', 'matvec_q8.mojo',
         'acc = block.fma(SIMD[DType.float32, WIDTH](sp[unsafe_offset=m * KB + j]), acc)',
         'acc = block.fma(SIMD[DType.float32, WIDTH](sp[unsafe_offset=m * KB]), acc)',
         'kernel: the block index of the scale (j) in the whole-block loop',
         ("All whole blocks of a row are scaled by the row's first scale (scales[m, 0]) instead of "
          'their own (scales[m, j]); only the first block and the partial last block are right. The'
          ' scale index must follow the block.'),
         ("block 0's scale",)),
    Held('16', 'tail-scale-previous-block', 'matvec_q8.mojo',
         's += tail * sp[unsafe_offset=m * KB + whole]',
         's += tail * sp[unsafe_offset=m * KB + whole - 1]',
         'kernel: the scale of the last, partial block (index whole = KB - 1, not whole - 1)',
         ('Wrong only when K is no multiple of 32: the partial last block is multiplied by the '
          "previous block's scale (or, when K < 32, by the previous row's last scale). The last "
          "block's scale is scales[m, K // 32]."),
         ('partial block',)),
    Held('16', 'tail-q-row-0', 'matvec_q8.mojo',
         'tail += qp[unsafe_offset=row + k].cast[DType.float32]() * xp[unsafe_offset=xrow + k]',
         'tail += qp[unsafe_offset=k].cast[DType.float32]() * xp[unsafe_offset=xrow + k]',
         "kernel: the partial last block's int8 reads (q's row offset m * K)",
         ("Wrong only when K is no multiple of 32, and right for row 0: every row's partial last "
          "block reads its int8 weights from q's first row (k instead of m * K + k)."),
         ('partial block',)),
    Held('16', 'tail-starts-at-block-index', 'matvec_q8.mojo',
         'for k in range(whole * BLOCK, K):',
         'for k in range(whole, K):',
         "kernel: the partial block's first column (whole * 32, not whole)",
         ('Wrong when K is no multiple of 32 and K > 32: the tail loop starts at column `whole` (a '
          'block count) instead of whole * 32, so it re-adds columns of the whole blocks with the '
          "last block's scale."),
         ('partial block',)),
    Held('16', 'first-vector-counted-twice', 'matvec_q8.mojo',
         'comptime for c in range(WIDTH, BLOCK, WIDTH):',
         'comptime for c in range(0, BLOCK, WIDTH):',
         'kernel: the vectors summed within a whole block (the first vector added again)',
         ("Every whole block's first SIMD vector of products is counted twice: the block's sum "
          "starts from the first vector and the loop over the block's vectors starts at 0 again. K "
          '< 32 (only a partial block) is right; everything else is off.'),
         ('first vector',)),
    Held('16', 'acc-overwritten-per-block', 'matvec_q8.mojo',
         'acc = block.fma(SIMD[DType.float32, WIDTH](sp[unsafe_offset=m * KB + j]), acc)',
         'acc = block * SIMD[DType.float32, WIDTH](sp[unsafe_offset=m * KB + j])',
         'kernel: the running sum over blocks (assigned instead of accumulated)',
         ("Only the last whole block of each row counts: each block's scaled sum replaces the "
          'accumulator instead of adding to it. Rows of one whole block (K <= 63) are right; '
          "GPT-2's rows keep 1 block of 24 or 96."),
         ('assigned',)),
    Held('16', 'bias-indexed-by-n', 'matvec_q8.mojo',
         'yp[unsafe_offset=n * M + m] = s + bp[unsafe_offset=m]',
         'yp[unsafe_offset=n * M + m] = s + bp[unsafe_offset=n]',
         'kernel: the bias index (b[m], the output column, not the row of x)',
         ('The products are right, the bias is not: every output of row n of x gets b[n] (b[0] at '
          'decode) instead of b[m]. y - x @ dequantize(q, scales).T is a constant per row.'),
         ('bias',)),
    Held('16', 'each-task-one-short', 'matvec_q8.mojo',
         'for i in range(task * per_task, min((task + 1) * per_task, N * M)):',
         'for i in range(task * per_task, min((task + 1) * per_task - 1, N * M)):',
         "kernel: each task's run of outputs (its last output skipped)",
         ("One output per task is never computed: each task's run stops one before the next task's "
          'start, so the outputs at the end of every run (every ceil(N*M / tasks)-th, a task a core) are left '
          'unwritten while the rest is exact.'),
         ("a task's range of outputs",)),
    Held('16', 'divides-by-scale', 'matvec_q8.mojo',
         ('acc = block.fma(SIMD[DType.float32, WIDTH](sp[unsafe_offset=m * KB + j]), acc)',
          's += tail * sp[unsafe_offset=m * KB + whole]'),
         ('acc = block.fma(SIMD[DType.float32, WIDTH](1 / sp[unsafe_offset=m * KB + j]), acc)',
          's += tail / sp[unsafe_offset=m * KB + whole]'),
         'kernel: dequantisation by the scale (q * scale, not q / scale)',
         ('The block sums are divided by their scale instead of multiplied: w = q * scale, and the '
          "output is huge (inf or NaN where a block's scale is 0). Look at how the scale is applied"
          " to a block's sum."),
         ('divided by its scale',)),
    Held('16', 'append-new-from-head-0', 'append.mojo',
         'op[unsafe_offset=dst + n + j] = np_[unsafe_offset=i * D + j]',
         'op[unsafe_offset=dst + n + j] = np_[unsafe_offset=j]',
         "kernel (append.mojo): which head's new key/value is written at position P",
         ("The cached positions are copied right, but every head's new position gets head 0's "
          "(batch 0's) new key and value: the new row is read at j instead of i * D + j. Decode "
          'attention then goes wrong from the first decode step in every head but the first.'),
         ("block 0's attention half",)),
    Held('16', 'append-out-stride-p', 'append.mojo',
         'var dst, src, n = i * (P + 1) * D, i * P * D, P * D',
         'var dst, src, n = i * P * D, i * P * D, P * D',
         ("kernel (append.mojo): the output's head stride ((P + 1) * D, one position longer than "
          "past's)"),
         ('The grown cache is scrambled from the second head on: each head is written at i * P * D,'
          " the input's stride, instead of i * (P + 1) * D, so heads overlap (each new position "
          "lands on the next head's first one) and the end of the output stays unwritten."),
         ("block 0's attention half",)),
    Held('16', 'decode-scale-by-num-heads', 'py',
         'scores = (query / math.sqrt(attn.head_dim)) @ key.transpose(-1, -2)',
         'scores = (query / math.sqrt(attn.num_heads)) @ key.transpose(-1, -2)',
         "model: decode attention's score scale (1 / sqrt(head_dim), not 1 / sqrt(n_head))",
         ("The kernel is right; decode attention's scores are divided by sqrt(12) instead of "
          "sqrt(64), so they are 2.3x too sharp and each decode step's logits differ. The scale is "
          "the head dimension's."),
         ("block 0's attention half",)),
    Held('16', 'append-onto-wrong-cache', 'py',
         ('key, value = append_op()(past_key, key), append_op()(past_value, value)  # [B, H, P+1, '
          'D]'),
         ('key, value = append_op()(past_value, key), append_op()(past_key, value)  # [B, H, P+1, '
          'D]'),
         "model: the decode cache's growth (new key appended to the past values and vice versa)",
         ('The new key is appended to the cached values and the new value to the cached keys, so '
          'decode attention scores against values and returns caches mixed up. The kernels are '
          'right; look at which past each new tensor goes onto.'),
         ("block 0's attention half",)),
    Held('16', 'decode-q-k-split-swapped', 'py',
         'query, key, value = F.split(attn.c_attn(hidden_states), [attn.split_size] * 3, axis=-1)',
         'key, query, value = F.split(attn.c_attn(hidden_states), [attn.split_size] * 3, axis=-1)',
         ("model: decode attention's q/k/v split (c_attn's output is query, key, value in that "
          'order)'),
         ("The first third of c_attn's output is taken as the key and the second as the query: the "
          'cache grows with queries stored as keys and the new token attends with its key. Every '
          "decode step's logits differ; the kernel is right."),
         ("block 0's attention half",)),
    Held('16', 'mlp-before-attention-added', 'py',
         'x = x + attended\n            x = x + block.mlp(block.ln_2(x))',
         'x = x + attended + block.mlp(block.ln_2(x))',
         ('model: the residual order in a block (the MLP reads the stream after the attention is '
          'added)'),
         ("Each block's MLP reads ln_2 of the stream from before the attention's output was added "
          '(both halves in parallel), so the MLP half is wrong from block 0 on. Add the attention '
          'first, then normalise for the MLP.'),
         ("block 0's attention half", 'how forward adds it to the stream')),
    Held('15', 'fma-arguments-swapped', 'matvec.mojo',
         'acc[r] += wp.unsafe_load[width=WIDTH]((m + r) * K + k) * xv',
         'acc[r] = acc[r].fma(xv, wp.unsafe_load[width=WIDTH]((m + r) * K + k))',
         "kernel: the whole-vector loop's multiply-accumulate (acc * x + w, not w * x + acc)",
         ("Every shape with a whole vector of K is off; the one whose K is below the vector width "
          "runs the tail alone and is right. The vector loop's accumulation is wrong."),
         ('whole vectors of K',)),
    Held('16', 'block-second-vector-skipped', 'matvec_q8.mojo',
         'comptime for c in range(WIDTH, BLOCK, WIDTH):',
         'comptime for c in range(WIDTH, BLOCK - WIDTH, WIDTH):',
         "kernel: the vectors summed within a whole block of 32 (the last one left out)",
         ("Right only where K is below 32 (no whole block); every whole block drops its last "
          "vector's columns."),
         ('whole blocks of K',)),
    Held('16', 'block-scale-by-column', 'matvec_q8.mojo',
         'sp[unsafe_offset=m * KB + j]',
         'sp[unsafe_offset=m * KB + k]',
         "kernel: the index of a whole block's scale (its column k, not its block j)",
         ("Block 0's scale is right (k = j = 0); every later block reads the scale 32 times too far "
          "along (another row's, or past the end: NaN). Right on shapes with one whole block at most."),
         ('a block after a row',)),
    Held('16', 'append-source-stride', 'append.mojo',
         'var dst, src, n = i * (P + 1) * D, i * P * D, P * D',
         'var dst, src, n = i * (P + 1) * D, i * (P + 1) * D, P * D',
         "kernel (append.mojo): where head i's past positions start in past (i * P * D)",
         ("matvec_q8 passes alone; the cache gpt2_append grows reads head i's past at the output's "
          "stride, so heads after the first get shifted positions and the last reads past the end. "
          "The decode is off with MAX's products in place too: the append is the suspect."),
         ('gpt2_append',)),
    Held('17', 'split-reads-next-split-key', 'flash.mojo',
         'var limit = min(end, P + t + 1)  # query t sees the keys up to its own position',
         'var limit = min(end, P + t) + 1  # query t sees the keys up to its own position',
         "kernel: the split's key range at decode (each split reads one key past its end)",
         ("Wrong only at decode when a head's keys are split (a head alone): every split but the "
          "last also scores the next split's first key, so that key is counted twice. Prefill and "
          "unsplit decode are right; the causal limit must not exceed the split's end."),
         ('split between tasks',)),
    Held('17', 'values-read-from-key-cache', 'flash.mojo',
         'var vv = vc.unsafe_load[width=W](value + e * W).cast[DType.float32]()',
         'var vv = kc.unsafe_load[width=W](value + e * W).cast[DType.float32]()',
         "kernel: the accumulator's values (read from the key cache)",
         ('The attention weights are right but they weight the keys instead of the values: the '
          "accumulator loads from k_cache. Every case's output equals softmax(scores) @ keys."),
         ('values are read from the key cache',)),
    Held('17', 'cache-head-stride-t', 'flash.mojo',
         'var keys, values = head * N * D, head * N * D',
         'var keys, values = head * T * D, head * T * D',
         "kernel: a head's offset in the caches (head * N * D, the cache's N positions, not T)",
         ("Right on each case's first head only: the other heads read their keys and values at head"
          " * T * D, the stride of the new q/k/v, instead of head * N * D, the cache's, so they "
          "attend over another head's (or zero) positions."),
         ('a head held T positions', "where a head's numbers start")),
    Held('17', 'output-row-ignores-t', 'flash.mojo',
         'var out = (head * T + t) * D',
         'var out = head * T * D',
         "kernel: where a query's output row is stored ((head * T + t) * D)",
         ("Decode is right; at prefill every query of a head writes its result to the head's first "
          "row, so row 0 holds the last query's output and the other rows are left unwritten."),
         ('its output start',)),
    Held('17', 'value-cache-gets-keys', 'flash.mojo',
         'vc.unsafe_store(to + e, vp.unsafe_load[width=W](source + e).cast[k_cache.dtype]())',
         'vc.unsafe_store(to + e, kp.unsafe_load[width=W](source + e).cast[k_cache.dtype]())',
         'kernel: the store of the new values into v_cache (the keys are stored there)',
         ('The value cache receives the new keys: at positions P .. P+T-1 v_cache equals k, so the '
          'new positions contribute keys instead of values to every output, and the cache check '
          'fails for the values. Look at what is stored into v_cache.'),
         ("v_cache holds the call's k",)),
    Held('17', 'exp-vector-tail-dropped', 'flash.mojo',
         ('                    while c < count:\n                        s[unsafe_offset=c] = '
          'exp(s[unsafe_offset=c] - new_m)\n                        c += 1\n'),
         '',
         "kernel: the exponentials' scalar tail (the last count % W scores of a tile)",
         ("Whenever a tile's key count is no multiple of the vector width (37 keys, the last tile "
          'of 1024 + P), the last count % W scores are used as raw scores, never exponentiated, as '
          'weights in l and the accumulator. Tiles of whole vectors are right.'),
         ("vector loop's tail",)),
    Held('17', 'combine-sum-without-weights', 'flash.mojo',
         'total += ls[unsafe_offset=at] * weight',
         'total += ls[unsafe_offset=at]',
         "kernel: the combine of splits, the sum l (each split's l rescaled by exp(m_s - m))",
         ("Wrong only at decode when a head's keys are split: the accumulators are rescaled to the "
          'common maximum but the sums l are added as they are, so the output is divided by the '
          'wrong total (rows no longer sum to 1). Rescale l_s by the same exp(m_s - m).'),
         ('combined', 'normalisation')),
    Held('17', 'split-normalised-before-combine', 'flash.mojo',
         'accs.unsafe_store(at * D + e * W, acc[e])',
         'accs.unsafe_store(at * D + e * W, acc[e] / l)',
         ("kernel: the split's partial result (divided by its own l before the combine divides "
          'again)'),
         ("Wrong only at decode when a head's keys are split: each split stores acc / l, and the "
          'combine divides by the total l again, so the output is divided twice (far too small). A '
          'split keeps its raw accumulator.'),
         ('combined',)),
    Held('17', 'running-max-never-updated', 'flash.mojo',
         '                    m = new_m\n',
         '',
         'kernel: the running maximum m (never updated after a tile)',
         ("Only the last tile of keys counts: m stays at -infinity, so each tile's rescale factor "
          "exp(m - m') is 0 and wipes l and the accumulator; cases of one tile (<= 64 keys) are "
          'right, longer ones attend over their last tile only (and split decode gives NaN). Update'
          " m to m' after each tile."),
         ('running maximum',)),
    Held('17', 'query-of-band-start', 'flash.mojo',
         'qv[e] = qp.unsafe_load[width=W]((head * T + t) * D + e * W) * scale',
         'qv[e] = qp.unsafe_load[width=W]((head * T + t0) * D + e * W) * scale',
         "kernel: which query a band's row loads (t, not the band's first t0)",
         ("At decode right; at prefill every query of a band of 8 uses the band's first query (t0) "
          'with its own causal limit: queries t0+1 .. t0+7 of each band are wrong.'),
         ('band',)),
    Held('17', 'key-tile-offset-missing', 'flash.mojo',
         'var key = keys + (j0 + j) * D',
         'var key = keys + j * D',
         "kernel: the key's position in the tile loop (j0 + j)",
         ('Right while all keys fit one tile of 64 (and the split starts at 0): every later tile '
          "scores the first tile's keys again (while its values are the right ones), so cases over "
          'hundreds of keys are wrong. The key of tile position j is key j0 + j.'),
         ('each tile of it reads',)),
    Held('17', 'exp-against-old-max', 'flash.mojo',
         ('s.unsafe_store(c, exp(s.unsafe_load[width=W](c) - new_m))',
          's[unsafe_offset=c] = exp(s[unsafe_offset=c] - new_m)'),
         ('s.unsafe_store(c, exp(s.unsafe_load[width=W](c) - m))',
          's[unsafe_offset=c] = exp(s[unsafe_offset=c] - m)'),
         "kernel: the exponentials exp(s - m') (taken against the old maximum m)",
         ("NaN everywhere: the tile's weights are exp(s - m) with the old running maximum, which is"
          ' -infinity on the first tile, so exp gives inf and inf / inf is NaN. The weights use the'
          " new maximum m'."),
         ('running maximum',)),
    Held('17', 'keys-seen-one-short', 'flash.mojo',
         'var S = P + T  # the keys the last query sees',
         'var S = P + T - 1  # the keys the last query sees',
         'kernel: the number of keys S (P + T): the last query misses its own key',
         ('The last new query (the only one at decode) never sees its own key: S is one short, so '
          'its keys stop at P + T - 2 (with one key, nothing: 0 / 0, NaN). Earlier queries of a '
          'prefill are right.'),
         ('keys end one short',)),
    Held('17', 'positions-without-past', 'py',
         ('positions = Tensor.arange(0, seq_len, dtype=DType.int64, device=input_ids.device) + past'
          '  # [T]: P..P+T-1'),
         ('positions = Tensor.arange(0, seq_len, dtype=DType.int64, device=input_ids.device)  # '
          '[T]: P..P+T-1'),
         'model: the position embeddings at decode (positions start at past, not 0)',
         ('The prompt is right; every decode step embeds its token at position 0 instead of P, so '
          "decode logits are off from the first decode step, while the kernel and the caches' "
          'earlier positions are right.'),
         ('embeddings',)),
    Held('17', 'positions-from-wte', 'py',
         'x = t.wte(input_ids) + F.gather(t.wpe.weight, positions, axis=0)  # [B, T, C]',
         'x = t.wte(input_ids) + F.gather(t.wte.weight, positions, axis=0)  # [B, T, C]',
         'model: the position embedding table (wpe, gathered from wte)',
         ('The position embedding is gathered from the token table wte instead of wpe: position p '
          "adds token p's embedding. The stream is wrong from the embeddings on, before any block."),
         ('embeddings',)),
    Held('17', 'merge-heads-by-reshape', 'py',
         'x = x + attn.c_proj(attn._merge_heads(heads, attn.num_heads, attn.head_dim))',
         ('x = x + attn.c_proj(heads.reshape([input_ids.shape[0], seq_len, attn.num_heads * '
          'attn.head_dim]))'),
         ('model: merging the heads after the kernel ([B, H, T, D] -> [B, T, C] needs the '
          'transpose)'),
         ("Decode (one position) is right; at prefill the kernel's output [B, H, T, D] is reshaped "
          "to [B, T, C] without moving the head axis, so each position's vector mixes several "
          'positions of one head. The kernel and the caches are right; look at how the heads are '
          'merged.'),
         ('after your kernel',)),
    Held('17', 'residual-from-normalised', 'py',
         ('q, k, v = F.split(attn.c_attn(block.ln_1(x)), [attn.split_size] * 3, axis=-1)'
          '\n            q, k, v = (attn._split_heads'),
         ('x = block.ln_1(x)\n            q, k, v = F.split(attn.c_attn(x), [attn.split_size] * 3, '
          'axis=-1)\n            q, k, v = (attn._split_heads'),
         "model: the attention half's residual (added to ln_1's output instead of the stream)",
         ("The attention's output is added to ln_1(x) instead of x: the stream is replaced by its "
          'normalised copy in every block. q, k, v and the caches of block 0 are right; the stream '
          "after block 0's attention is not."),
         ("block 0's attention half",)),
    Held('17', 'past-advances-by-one', 'py',
         'past += ids.shape[1]',
         'past += 1',
         'model/generate: advancing past after each call (by the T positions just written)',
         ("After the prompt, past counts one position instead of the prompt's T: the first decode "
          "step writes its key over position 1 of the prompt's and attends over only 2 positions, "
          'so the generated ids differ from the second token on. Advance past by the number of '
          'positions each call wrote.'),
         ('past',)),
    Held('17', 'q8-head-without-ln-f', 'py',
         'return self.head(t.ln_f(x.reshape([batch, width])))  # [B, V]',
         'return self.head(x.reshape([batch, width]))  # [B, V]',
         "model: GPT2FlashQ8's head input (ln_f skipped)",
         ("GPT2FlashQ8's decode logits are wrong while GPT2Flash's are right: the int8 head reads "
          'the last hidden state without the final LayerNorm ln_f.'),
         ('ln_f',)),
    Held('17', 'sum-skips-partial-vector', 'flash.mojo',
         'for j in range(count):  # added to the sum and the accumulator',
         'for j in range(count - count % W):  # added to the sum and the accumulator',
         "kernel: the keys added into l and acc (a tile's last count % W left out)",
         ("The scores and exps are right, but the loop that adds them into l and the accumulator "
          "stops at the last whole vector of W = 16 keys: a tile of 37 keys loses its last 5, a query "
          "with fewer than 16 keys adds nothing (0 / 0). The loop over keys stepping by the vector, "
          "not the tile, is where to look."),
         ('a vector of keys inside one',)),
    Held('17', 'output-at-head-mod-h', 'flash.mojo',
         'var out = (head * T + t) * D',
         'var out = ((head % H) * T + t) * D',
         "kernel: where a (b, h) query's output is stored (head % H drops the sequence)",
         ("Right with one sequence; with a batch of 2 every sequence stores its output at sequence "
          "0's place, so sequence 0 holds sequence 1's outputs (or its own, run to run) and "
          "sequence 1's are never written."),
         ("sequence 0 holds sequence 1's",)),
    Held('17', 'key-vector-offset', 'flash.mojo',
         'dot = qv[e].fma(kc.unsafe_load[width=W](key + e * W).cast[DType.float32](), dot)',
         'dot = qv[e].fma(kc.unsafe_load[width=W](key + e).cast[DType.float32](), dot)',
         "kernel: the offset of a key's vector e (e * W, not e)",
         ("Every score q . k is taken against overlapping slices of the key; a query that sees one "
          "key is right whatever its score, every other is off."),
         ('the scores q . k',)),
    Held('17', 'decode-runs-cut-short', 'flash.mojo',
         'var per_run = (tasks + runs - 1) // runs',
         'var per_run = tasks // runs',
         "kernel: the tasks a run takes at decode (tasks // runs leaves the last ones out)",
         ("At decode with a number of heads no multiple of the runs (the cores), the last heads are "
          "never attended nor stored: their new positions keep what the cache held."),
         ('never written',)),
    Held('18', 'band-keys-head-offset', 'paged_flash.mojo',
         'var keys, values = slot(b, j0, 0) + h * D, slot(b, j0, 1) + h * D',
         'var keys, values = slot(b, j0, 0), slot(b, j0, 1) + h * D',
         "kernel: the prefill band's head offset of its keys within a position",
         "A prompt band (4 or more rows of one request) scores every head against head 0's keys, while it "
         "weights the values of the right head. Right for head 0, for a single-head pool and for every row taken "
         "row by row (decode rows, bands of fewer than 4 rows); wrong for heads 1..H-1 of every prompt band. A "
         "helpful message says the prefill rows of every head but the first are off, and that a head's keys "
         "sit h * D floats into a position.",
         ("head 0's keys",)),
    Held('18', 'band-queries-unscaled', 'paged_flash.mojo',
         'qt[unsafe_offset=d * W + i] = qd * scale',
         'qt[unsafe_offset=d * W + i] = qd',
         "kernel: the band's queries scaled by 1/sqrt(D)",
         "The band path scores q . k without dividing by sqrt(64) = 8, so its softmax is far too sharp; the "
         "row-by-row path still scales. Right for decode rows and chunks of fewer than 4 rows (and where one "
         "key dominates anyway); wrong for the rows of every prompt band. A helpful message says the prefill "
         "rows' scores are scaled by another number (8 times too big) and points at the 1/sqrt(D) of the band.",
         ('not scaled',)),
    Held('18', 'row-sum-not-rescaled', 'paged_flash.mojo',
         'rescaled\n                        l = l * factor',
         'rescaled',
         "kernel: the row-by-row (decode) online softmax's rescale of its running sum",
         "In the row path the running sum l is not multiplied by exp(m_old - m_new) when a tile raises the "
         "maximum, while the weighted values are: the denominator is too big and the outputs shrink. Right when "
         "a row's keys fit in one tile (at most 64 keys, one page) or the first tile holds the maximum; wrong "
         "for decode rows (and small bands) whose keys span several tiles or pages. Prefill bands are right. A "
         "helpful message names decode rows with many positions and the online softmax's rescale of l.",
         ('rescaling',)),
    Held('18', 'decode-bound-one-short', 'paged_flash.mojo',
         'var S = cached + r + 1  # the keys row r sees: 0 .. its own position',
         'var S = cached + r  # the keys row r sees: 0 .. its own position',
         "kernel: the causal bound (keys seen) of a row in the row-by-row / decode path",
         "Rows taken one at a time attend to positions 0 .. pos - 1, leaving out their own key; a row at "
         "position 0 has no key at all and comes out 0/0 = NaN. Prompt bands of 4+ rows are right; every "
         "decode row and every row of a chunk of 1-3 rows is wrong (the split decode too). A helpful message "
         "says the bound is one short: a row sees its own position.",
         ('one short',)),
    Held('18', 'band-mask-one-long', 'paged_flash.mojo',
         'seen.gt(',
         'seen.ge(',
         "kernel: the band's causal mask (comparison of a key's position with a row's)",
         "The band's mask keeps key j when j <= seen = pos + 1, so each row also scores the next row's key "
         "(already stored) into its maximum and sum, though its value is never added. Right for decode rows, "
         "small chunks and the last row of each band (the band never reads past its last row); wrong for every "
         "other row of a prompt band. A helpful message says the causal bound is one long in the prefill rows.",
         ('causal bound',)),
    Held('18', 'split-total-unweighted', 'paged_flash.mojo',
         'total += ls[unsafe_offset=at] * weight',
         'total += ls[unsafe_offset=at]',
         "kernel: the split-KV combine's weighting of each split's running sum",
         "When a decode head's keys are split across idle threads, the combine rescales each split's values by "
         "exp(m_split - m_top) but adds the splits' sums l unscaled, so the denominator is wrong. Right whenever "
         "there is one split (all prefill, and decode batches with B*H >= cores) and when a split is empty; "
         "wrong for a lone decode head (few requests x heads) with keys in two or more splits. A helpful "
         "message says the split decode rows are off and the combine must weight l like the values.",
         ('the combine',)),
    Held('18', 'row-values-from-keys', 'paged_flash.mojo',
         'var keys, values = slot(b, j0, 0), slot(b, j0, 1)',
         'var keys, values = slot(b, j0, 0), slot(b, j0, 0)',
         "kernel: where the row-by-row (decode) path reads its values: the values' half of the page",
         "The row path takes its values from the keys' half of the page (kv 0), so it averages keys. Prompt "
         "bands of 4+ rows are right; decode rows and chunks of 1-3 rows are wrong; the pool is written right. "
         "A helpful message says the decode rows weight the keys instead of the values (keys and values "
         "exchanged in reading).",
         ('the keys were read for the values',)),
    Held('18', 'pool-layer-kv-order', 'paged_flash.mojo',
         'return ((page * 2 + kv) * L + lay) * part + (pos % PAGE) * head_size',
         'return ((page * L + lay) * 2 + kv) * part + (pos % PAGE) * head_size',
         "kernel: the pool's layout, the order of the keys/values and layer axes in a page's offset",
         "The pool is indexed as [pages, L, 2, PAGE, H, D] instead of [pages, 2, L, PAGE, H, D]: the same when "
         "the cache has one layer, and layer 0's keys still land right. With several layers the new keys and "
         "values go to another (kv, layer) block of the same page, and cached positions are read from there; "
         "a fresh prompt's attention is right (stored and read the same wrong way) while the pool and any "
         "cached position are wrong. A helpful message says the pool holds values/other layers' entries "
         "where the keys of this layer belong.",
         ('blocks[page, 0 or 1, layer, slot]',)),
    Held('18', 'xscale-over-128', 'int8_products.mojo',
         'var s = abs(v).reduce_max() / 127',
         'var s = abs(v).reduce_max() / 128',
         "int8 products: the activation quantisation scale of a whole block of x",
         "Each full block of x is scaled by max|x|/128: the grid is a little finer than Q8_0's, and the block's "
         "positive largest value rounds to 128, which wraps to -128 in a byte and flips sign. Right nowhere in a "
         "full block (only a last block of K % 32 columns keeps /127); the largest elements are the worst. A "
         "helpful message says x's quantisation takes each block's largest element otherwise: the scale is "
         "max|x|/127 so the rounded values stay within +-127.",
         ("does not follow w's sign", "its block's largest |x|")),  # AVX2's products; VNNI's
    Held('18', 'xq-truncated', 'int8_products.mojo',
         'u += rint[BLOCK](v / s).cast[DType.int32]()',
         'u += (v / s).cast[DType.int32]()',
         "int8 products: rounding x / scale to the nearest integer when quantising x",
         "x / s is cast straight to int32, which truncates toward zero, so about half the elements of every "
         "full block lose one step (their magnitude shrinks). Only the last, partial block of a K not a "
         "multiple of 32 still rounds; every M and every path is affected. A helpful message says x is "
         "rounded toward zero instead of to the nearest (Q8_0 rounds to nearest, ties to even).",
         ('a rounding of x of your own',)),
    Held('18', 'scales-row-stride-floor', 'int8_products.mojo',
         'var sw = block_scales(sp, n * KB + PER * p)',
         'var sw = block_scales(sp, n * (K // BLOCK) + PER * p)',
         "int8 products: the index of a weight block's scale (row stride of scales) in the few-rows path",
         "A row of scales is taken to hold K // 32 entries instead of KB = ceil(K / 32): the same for GPT-2's "
         "K (multiples of 32) and for output column 0; for a K of 100 every column n >= 1 multiplies its "
         "blocks by scales of the previous row's. Only the few-rows `row` path (M below GEMM_FROM) reads them "
         "this way; the repacked gemm path is right. A helpful message says a K no multiple of 32 is off, the "
         "scales' row being ceil(K/32) long.",
         ('K % 32 columns', 'its own scale')),
    Held('18', 'gemm-row-scale-first', 'int8_products.mojo',
         'var sx = SIMD[DType.float32, L](xs[(m0 + i) * KB + b])',
         'var sx = SIMD[DType.float32, L](xs[m0 * KB + b])',
         "int8 products: the activation scale of each row of x in the repacked (many-rows) gemm",
         "In the gemm path every row of a group of MR = 4 rows of x uses the first row's block scale, so rows "
         "m with m % 4 != 0 are scaled by another row's max|x|/127. Right for the few-rows path (M < 8) "
         "and for rows 0, 4, 8, ...; wrong for the other rows at M = 13, 16, 64 and in a prompt. A helpful message "
         "names the rows after each group's first and the per-row activation scale.",
         ("their block's scale",)),
    Held('18', 'row-bias-twice', 'int8_products.mojo',
         'var y = acc[i].reduce_add()',
         'var y = acc[i].reduce_add() + bp[unsafe_offset=n]',
         "int8 products: the bias in the few-rows (decode) path",
         "The row path starts its sum with the bias and adds it again when it stores y: every output is "
         "x.w + 2b. Right for the tied head (no bias, zeros) and in the gemm path (M >= 8); wrong for "
         "every Linear at decode and small M. A helpful message says the outputs are off by exactly the bias "
         "(no x explains them; the bias is added twice).",
         ('the bias',)),
    Held('18', 'gemm-last-group-dropped', 'int8_products.mojo',
         '        while m0 + MR <= M:\n            var start',
         '        while m0 + MR < M:\n            var start',
         "int8 products: the loop over groups of MR rows of x in the gemm path (the last full group)",
         "The gemm loop stops one group early when M is a multiple of 4, and no tail branch takes four rows, so "
         "the last 4 rows of y are never written (whatever the memory held). Right when M is not a multiple of "
         "4 and in the few-rows path; wrong for M = 16 and 64 (and prompts of such lengths). A helpful message "
         "says the last rows of x, after the last whole group, are left out.",
         ('a later group of rows of x',)),
    Held('18', 'layer-index-constant', 'py',
         'input_row_offsets, i)  # [T, H, D]',
         'input_row_offsets, 0)  # [T, H, D]',
         "model: the layer index passed to the paged attention in each block",
         "Every block stores its keys and values into layer 0's slots and reads from there. Within one call "
         "each layer overwrites the new positions before reading them, so a fresh prompt is right; from the "
         "first decode step (or a chunk after cached positions) on, the cached positions hold the last layer's "
         "keys, so every layer but the last attends to the wrong ones. Kernels pass. A helpful message says the "
         "model is right on prompts and wrong once there is a cache, at a block's attention: pass the block's "
         "index as the layer.",
         ('layer 0 it is told', 'under its own layer_idx')),
    Held('18', 'mlp-uses-ln-1', 'py',
         'block.mlp(block.ln_2(x))',
         'block.mlp(block.ln_1(x))',
         "model: the layer norm before the MLP (ln_2)",
         "The MLP half normalises with the attention's ln_1 weights instead of ln_2's: wrong on every row and "
         "batch, from the first block's MLP on, while both kernels pass. A helpful message places the first "
         "difference at block 0's MLP half (after its attention half agrees).",
         ("block 0's ln_2",)),
    Held('18', 'embed-float-wte', 'py',
         'x = self.embed(tokens) + F.gather(t.wpe.weight, positions, axis=0)  # [T, C]',
         'x = F.gather(t.wte.weight, tokens, axis=0) + F.gather(t.wpe.weight, positions, axis=0)  # [T, C]',
         "model: the token embedding from the dequantised (int8) wte",
         "The embedding takes the float wte rows while the head (and the reference) use wte quantised: the "
         "inputs differ by the int8 rounding (about 0.4% of each block's largest value), small but far above "
         "float32's noise, on every row. A helpful message places the first difference at the embeddings and "
         "says the table must be the int8 one, q times its block's scale.",
         ('int8 table', "has no attribute 'wte'")),  # the float table, now dropped at load, read: the line said
    Held('18', 'linear-bias-dropped', 'py',
         'return matmul_q8(x, self.q, self.scales, self.bias)',
         'return matmul_q8(x, self.q, self.scales)',
         "model: the Linear's bias passed to matmul_q8",
         "Every quantised Linear is called without its bias, so the kernel adds zeros: c_attn, c_proj, c_fc and "
         "the MLP's c_proj all miss their bias, on every row. The kernels pass; only the head (which has none) "
         "is unaffected. A helpful message places the difference at block 0's attention half and says the "
         "Linear's bias is missing.",
         ("block 0's attention half",)),
    # Nine more for step 18, by a second learner's stand-in on an AVX-512 VNNI CPU (2026-12-07), each run once
    # before its message was written here; every one failed in the right part at once. Four were told vaguely
    # then and are said by what the kernel or model computed now: a row path's scale index and the gemm's
    # bias added twice (the scales and bias solved from the outputs), positions without the cache length and
    # token ids for positions (the embedding's rows read back).
    Held('18', 'scores-over-d', 'paged_flash.mojo',
         'var scale = Float32(1) / sqrt(Float32(D))',
         'var scale = Float32(1) / Float32(D)',
         "kernel: the scores' scale",
         "Every score is scaled by 1 / D instead of 1 / sqrt(D): wrong on every row with more than one key, on "
         "every path. A helpful message says the scale is 1 / D where it should be 1 / sqrt(D).",
         ('1 / D',)),
    Held('18', 'store-keys-values-swapped', 'paged_flash.mojo',
         'var kto, vto = slot(b, pos, 0), slot(b, pos, 1)',
         'var kto, vto = slot(b, pos, 1), slot(b, pos, 0)',
         "kernel: where the new keys and values are stored in the pool (index 0 keys, 1 values)",
         "The new rows' keys go to the values' half of the pool and their values to the keys' half: the pool "
         "left is wrong at every new position and every output is off. A helpful message reads the pool: keys "
         "and values stored the other way round.",
         ('the other way round',)),
    Held('18', 'row-scale-vector-index', 'int8_products.mojo',
         'var sw = block_scales(sp, n * KB + PER * p)',
         'var sw = block_scales(sp, n * KB + p)',
         "int8 products: the few-rows path's index of a vector's block scales",
         "In the row path a vector of 64 bytes (two blocks) takes the scales at the vector's index p, p + 1, not "
         "its blocks' 2p, 2p + 1: right for the first vector of a row, wrong from block 2 on, on products of few "
         "rows with K past 64. A helpful message says which scale each block took.",
         ("another block's scale",), needs='avx512_vnni'),
    Held('18', 'gemm-bias-twice', 'int8_products.mojo',
         '            yp.unsafe_store(at, acc[2 * i] + bp.unsafe_load[width=L](n_lo))',
         '            acc[2 * i] += bp.unsafe_load[width=L](n_lo)\n'
         '            acc[2 * i + 1] += bp.unsafe_load[width=L](n_lo + L)\n'
         '            yp.unsafe_store(at, acc[2 * i] + bp.unsafe_load[width=L](n_lo))',
         "int8 products: the bias in the gemm path's full tiles",
         "The gemm path adds the bias twice on full tiles of q's rows (once into the sums, once at the store): "
         "products of many rows are off by exactly b[n] on every output of a full tile. A helpful message says "
         "the bias was added twice.",
         ('b[n] twice',)),
    Held('18', 'ln-1-and-2-exchanged', 'py',
         ('q, k, v = F.split(attn.c_attn(block.ln_1(x))', 'x = x + block.mlp(block.ln_2(x))'),
         ('q, k, v = F.split(attn.c_attn(block.ln_2(x))', 'x = x + block.mlp(block.ln_1(x))'),
         "model: which layer norm goes before the attention and which before the MLP",
         "ln_1 and ln_2 exchanged in every block: wrong on every row. A helpful message says the blocks' layer "
         "norms are called in the wrong order.",
         ('h.0.ln_2, h.0.ln_1',)),
    Held('18', 'mlp-residual-dropped', 'py',
         'x = x + block.mlp(block.ln_2(x))',
         'x = block.mlp(block.ln_2(x))',
         "model: the MLP half's residual add",
         "The MLP's output replaces the stream instead of being added to it: wrong on every row from block 0's "
         "MLP half on. A helpful message places it after the MLP, at the residual add.",
         ('the residual add',)),
    Held('18', 'rows-ignored', 'py',
         'chosen = t.ln_f(F.gather(x, rows, axis=0))',
         'chosen = t.ln_f(x)',
         "model: the rows whose logits forward returns",
         "Every row's logits are returned in the tokens' order whatever rows are asked for: the server, which "
         "asks for each request's last row, would read the wrong ones. A helpful message says to gather x at "
         "rows before ln_f and the head.",
         ('gather x at `rows`',)),
    Held('18', 'positions-without-cache', 'py',
         'positions = ragged_positions(tokens.shape[0], input_row_offsets, kv_collection.cache_lengths)',
         'positions = ragged_positions(tokens.shape[0], input_row_offsets, kv_collection.cache_lengths\n'
         '                             - kv_collection.cache_lengths)',
         "model: the rows' positions (after the positions a request has cached)",
         "Each row's position is its place among its request's new rows: prompts are right, decode rows take "
         "wpe's row 0. A helpful message says the embeddings' wpe rows are the rows' places, the cache length "
         "not added.",
         ('cache length',)),
    Held('18', 'wpe-by-token', 'py',
         'x = self.embed(tokens) + F.gather(t.wpe.weight, positions, axis=0)',
         'x = self.embed(tokens) + F.gather(t.wpe.weight, tokens, axis=0)',
         "model: the rows of wpe the embedding adds",
         "wpe's rows gathered by token id instead of position: wrong on every row. A helpful message says each "
         "row took the wpe row of its token id.",
         ('token id',)),
    Held('15', 'tasks-fewer-than-bands', 'matvec.mojo',
         'sync_parallelize(band, TASKS)',
         'sync_parallelize(band, TASKS // 4)',
         "kernel: how many tasks are started (fewer than the bands are sized for)",
         ("Bands are sized for TASKS tasks but only a quarter of them run: each shape's first quarter of rows of "
          "w (in whole bands) is right, the rest never written. A helpful message names the two counts."),
         ('bands sized for',)),
    Held('15', 'y-row-stride-k', 'matvec.mojo',
         'yp[unsafe_offset=n * M + m + r] = s + bp[unsafe_offset=m + r]',
         'yp[unsafe_offset=n * K + m + r] = s + bp[unsafe_offset=m + r]',
         "kernel: the row stride of y's index (K for M)",
         ("y's row n stored at n * K: rows overlap (a race) or fall past y where K > M; one row of x is right. A "
          "helpful message names the stride y is stored with, not a race alone."),
         ('row stride',)),
    # Three that crash (a band or tile whose end is not cut: a write past the output's end), told before by the
    # index checklist alone; since, the cases left run in a new process and the crashing ones are read by shape.
    Held('15', 'band-end-not-cut', 'matvec.mojo',
         'var end = min((task + 1) * per_task, M)',
         'var end = (task + 1) * per_task',
         "kernel: the end of each task's band (past M on the last band)",
         ("A crash where M is no multiple of the band: the last band runs past M and writes past y's end. The "
          "shapes whose M fills whole bands run right; a helpful message names M and a loop past its end."),
         ('past its end',)),
    Held('17', 'query-band-not-cut', 'flash.mojo',
         'for t in range(t0, min(t0 + QROWS, T)):',
         'for t in range(t0, t0 + QROWS):',
         "kernel: the end of a band of queries (past T on a band that is not whole)",
         ("A band of queries runs past T: it writes the next head's first rows (a race with that head's task) "
          "and, on the last head, past the output's end (a crash). A helpful message says a task writes past "
          "where it should stop."),
         ('past where it should stop', 'not cut at its end')),
    Held('18', 'row-tile-not-cut', 'int8_products.mojo',
         'for n in range(t0 * NT, min(t1 * NT, N)):',
         'for n in range(t0 * NT, t1 * NT):',
         "products: the few-rows path's last tile of q's rows (past N)",
         ("A crash on the few-rows products whose N is no multiple of the tile (N = 13): their last tile runs "
          "past N. A helpful message names N and a tile not cut at it; two crashes of nine say little more than "
          "the rows of q to keep below N."),
         ('not cut at', 'rows of q below N')),
    # A fourth round's, on step 18 (13 written, one on a path this CPU does not run): placed since by the pool's
    # halves, the rows whose keys fill more than one page, the bounds of few rows, and a crash reading chance
    # does not give; the others as they were told.
    Held('18', 'tile-crosses-page', 'paged_flash.mojo',
         'var count = min(TILE, PAGE - j0 % PAGE, S - j0)',
         'var count = min(TILE, S - j0)',
         "kernel: a band's tile of keys not cut at its page's end",
         "A band's tile of keys runs over its page's last slot into whatever follows in the pool: only rows whose "
         "keys fill more than one page are off. A helpful message names the page crossing.",
         ('crosses from one page',)),
    Held('18', 'pair-loop-drops-odd-row', 'paged_flash.mojo',
         'for i0 in range(0, n, 2):',
         'for i0 in range(0, n - 1, 2):',
         "kernel: the band's loop over pairs of rows (the last row of an odd band)",
         "A band of an odd number of rows never adds its last row's values: that row's output is 0. A helpful "
         "message names the rows handled two at a time.",
         ('one row of two',)),
    Held('18', 'row-values-head-offset', 'paged_flash.mojo',
         'var at = values + (h0 + i) * D',
         'var at = values + i * D',
         "kernel: the row-by-row path's value head offset",
         "Requests of few rows and decodes weigh head 0's values for every head. A helpful message names the "
         "values' head offset in the few-rows path.",
         ('head offset',)),
    Held('18', 'values-stored-from-k', 'paged_flash.mojo',
         'bp.unsafe_store(vto + e, vp.unsafe_load[width=W](r * head_size + e).cast[blocks.dtype]())',
         'bp.unsafe_store(vto + e, kp.unsafe_load[width=W](r * head_size + e).cast[blocks.dtype]())',
         "kernel: the store of the new values (from k)",
         "The pool's values half holds the new keys: every output off. A helpful message says which half holds "
         "which tensor.",
         ("holds the call's k",)),
    Held('18', 'row-position-not-offset', 'paged_flash.mojo',
         'var cached = Int(cl[unsafe_offset=b]) - Int(off[unsafe_offset=b])',
         'var cached = Int(cl[unsafe_offset=b])',
         "kernel: a row's position (its request's first row not subtracted)",
         "Every request after the first puts its rows at cache_lengths[b] + r with r the batch's row index: too "
         "many keys seen. A helpful message names the rows' offsets.",
         ("rows' offsets",)),
    Held('18', 'third-leftover-row-skipped', 'int8_products.mojo',
         'row[3](yp, xu, xs, qp, sp, bp, m0, n, K, N, KB)',
         'row[2](yp, xu, xs, qp, sp, bp, m0, n, K, N, KB)',
         "products: the few-rows path's three leftover rows of x (the third never written)",
         "With 3 or 7 rows of x the last row's outputs are never written: they change from run to run (where the "
         "memory did not hold the same by chance). A helpful message names that row of x.",
         ('a loop leaves out', 'rows of x 2 (of 3)', 'rows of x 6 (of 7)')),
    Held('18', 'row-path-last-block-dropped', 'int8_products.mojo',
         'for b in range(K // (4 * L) * PER, KB):',
         'for b in range(K // (4 * L) * PER, KB - 1):',
         "products: the few-rows path's last partial block of K",
         "The few-rows path leaves the last block out where K is no multiple of 32. A helpful message names the "
         "last block's columns and the few-rows path.",
         ('K % 32 columns',)),
    Held('18', 'quantised-tail-stored-wrong', 'int8_products.mojo',
         'xu[at + k - lo] = UInt8(u)',
         'xu[at + k] = UInt8(u)',
         "products: where x's partial last block is stored once quantised",
         "x's last, partial block is quantised into the wrong bytes: every product whose K is no multiple of 32 is "
         "off, in both paths. A helpful message names the last block's columns.",
         ('K % 32 columns',)),
    Held('18', 'ln-f-skipped', 'py',
         'chosen = t.ln_f(F.gather(x, rows, axis=0))',
         'chosen = F.gather(x, rows, axis=0)',
         "model: the final layer norm before the head",
         "forward skips ln_f: the kernels are right, the logits are not. A helpful message names ln_f.",
         ('ln_f',)),
    Held('18', 'band-stores-every-lane', 'paged_flash.mojo',
         'for i in range(n):',
         'for i in range(W):',
         "kernel: a band's store of its rows' outputs (W rows, not its n)",
         "A band of fewer than W rows stores W rows: over the next request's rows (a race) or past the output's "
         "end (a crash). A helpful message says a task writes past its rows.",
         ('two tasks write', 'past where it should stop', 'not past its request', 'stores more rows than it holds')),
    Held('16', 'round-half-up', 'py',
         'q = np.clip(np.rint(grouped / safe), -127, 127).astype(np.int8)',
         'q = np.clip(np.floor(grouped / safe + 0.5), -127, 127).astype(np.int8)',
         "quantize: how a tie (w / scale = k + 0.5) is rounded",
         ("q is 1 off on the weights whose w / scale is exactly k + 0.5 with k even: ties round up, where "
          "np.rint (the skeleton's rule) rounds them to even."),
         ('tie',)),
    Held('17', 'combine-max-from-zero', 'flash.mojo',
         'var top = NEG_INF',
         'var top: Float32 = 0',
         "kernel: the combine's maximum over a head's split keys (started at 0, not the lowest float)",
         ("NaN at decode where one head's keys are split and every score is far below 0: each part's weight "
          "exp(m_part - 0) underflows to 0 and the combine divides 0 by 0. Look at where the combine's maximum "
          "starts."),
         ('how the parts are combined', 'm started above every score')),
    Held('17', 'rescale-sign-flipped', 'flash.mojo',
         'var factor = exp(m - new_m)',
         'var factor = exp(new_m - m)',
         "kernel: the online softmax's rescale factor (exp(m_old - m_new))",
         ("NaN everywhere from the first key: exp(new_m - m) with m still the lowest float is inf, and 0 x inf "
          "is NaN. The rescale factor is taken the wrong way round."),
         ('the wrong way round',)),
    Held('17', 'bands-floor', 'flash.mojo',
         'var bands = (T + QROWS - 1) // QROWS',
         'var bands = T // QROWS',
         "kernel: the number of query bands (rounded down: the last, partial band never computed)",
         ("The queries after the last whole band of 8 are never computed (all of them at decode and for T < 8): "
          "their outputs hold whatever memory held, so they change from run to run. Not a race: count the "
          "partial band."),
         ('last, partial band', 'never written')),
    Held('18', 'row-leftover-blocks-from-vector-index', 'int8_products.mojo',
         'for b in range(K // (4 * L) * PER, KB):',
         'for b in range(K // (4 * L), KB):',
         "kernel: the few-rows path's loop over the blocks after its whole vectors (started at a vector's index)",
         ("Products of few rows are off: the blocks after the first K // 64 are summed again by the leftover loop, "
          "so x's second half counts twice. A helpful message says which blocks and the factor 2."),
         ('counted 2 times',), needs='avx512_vnni'),
    Held('18', 'gemm-x-row-stride-in-bytes', 'int8_products.mojo',
         'xu.bitcast[Int32]()[(m0 + i) * KB * GROUPS + b * GROUPS + g]))',
         'xu.bitcast[Int32]()[(m0 + i) * KB * BLOCK + b * GROUPS + g]))',
         "kernel: the many-rows path's row stride of the quantised x (bytes for 32-bit words)",
         ("Products of many rows are off on every row of x but the first, the same every run (some rows read past "
          "x change from run to run): where row m of x starts. Not a race alone, and rows after the first not right."),
         ('only from some number of rows on',)),
    Held('18', 'quantise-rows-by-tile-share', 'matmul_q8.mojo',
         'for m in range(task, M, tasks):',
         'for m in range(task * per_task, min((task + 1) * per_task, M)):',
         "kernel: which rows of x each task quantises (shared out by a count of tiles, not of rows)",
         ("A prompt's later rows of x are never quantised when M x K is large: products of 128 rows are off after "
          "some row, smaller ones right. The products part must fail, not only the served texts."),
         ('a later group of rows of x', 'rows of x after row')),
]
