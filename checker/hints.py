"""Progressive hints, and the reference for one part: `--hint` and `--solution`.

    pixi run s07 --hint       the next hint for the first failing part (run again for the next one)
    pixi run s07 --solution   the solution's code for that part only

HINTS[step][part] is a ladder of at least three rungs: the idea, then the API
to use with a link to its reference page, then a line close to the code (never
a whole line of the solution; `--solution` stays the last resort). A part name
that is not a key is matched by its first word (step 06 names its parts after
the positions it asks for). SOURCES[step][part] names the solution code that part
checks: a function, `Class.method`, or `Class.field`. How far a learner has got
in the hints of a part is kept in .cache/hints.json.
"""

from __future__ import annotations

import ast
import json

from checker import paths

DOCS = "https://docs.modular.com/max/api/python"


def api(name: str) -> str:
    """The reference page of a MAX API: 'F.softmax', 'Tensor.reshape', 'nn.Linear' or 'graph.Dim'."""
    kind, _, attr = name.partition(".")
    if kind == "F":
        return f"{DOCS}/experimental.functional/#max.experimental.functional.{attr}"
    if kind == "Tensor":
        return f"{DOCS}/generated/max.experimental.tensor.Tensor/#max.experimental.tensor.Tensor.{attr}"
    if kind == "nn":
        return f"{DOCS}/generated/max.experimental.nn.{attr}/"
    return f"{DOCS}/graph/#max.graph.{attr}"


HF_CONFIG = "https://huggingface.co/docs/transformers/model_doc/gpt2#transformers.GPT2Config"
TOKENIZER = "https://huggingface.co/docs/tokenizers/api/tokenizer#tokenizers.Tokenizer"
NUMPY_RANDOM = "https://numpy.org/doc/stable/reference/random/generator.html"
NUMPY_SORT = "https://numpy.org/doc/stable/reference/generated/numpy.sort.html"
PYTHON_YIELD = "https://docs.python.org/3/reference/simple_stmts.html#the-yield-statement"


def _field(idea: str, code: str) -> list[str]:
    return [idea, f"Hugging Face documents every field of GPT-2's config: {HF_CONFIG}", code]


_CONFIG = {
    "vocab_size": _field("How many different tokens can GPT-2 read? Its tokenizer's vocabulary decides.",
                         "Byte-level BPE: 256 byte tokens, 50,000 merges, and one <|endoftext|>: 256 + 50,000 + 1."),
    "n_positions": _field("The longest sequence GPT-2 small attends over: the rows of its position table.",
                          "A power of two between 512 and 2048: GPT-2 small's context is 1024 tokens."),
    "n_embd": _field("The width of the residual stream: each token is a vector this long.",
                     "12 heads of 64 channels each: 768."),
    "n_layer": _field("How many transformer blocks are stacked in GPT-2 small?",
                      "The checkpoint has blocks h.0 to h.11: 12."),
    "n_head": _field("How many attention heads per block?", "n_embd / n_head = 64 channels per head: 12 heads."),
    "n_inner": _field("The width of the MLP's hidden layer.", "GPT-2's MLP widens each token 4x: 4 * 768 = 3072."),
    "layer_norm_epsilon": _field("The small number LayerNorm adds to the variance so it never divides by zero.",
                                 "It is in the checkpoint's config.json: 1e-5."),
}
_EARLIER = ["An earlier step that your file imports fails its own check; this step cannot pass before it does.",
            "The line names the step: its own check (pixi run sNN) says which of its parts fails and why.",
            "Run the check the details name, fix that step, then come back: this check re-runs it first."]
_COMPILED = ["Op by op your code is right; compiled into a graph, as pixi run gpt2 runs it, it is not.",
             f"Compiled, the batch and the length are symbols ({api('graph.Dim')}), not numbers: Tensor ops take "
             "them as they are; int(), range() and numpy on them cannot be compiled.",
             "A mask from a column and a row of positions compared (arange, <=) is miscompiled by MAX 26.7 "
             "(python -m checker.max_bugs): build it with F.band_part instead."]
_TWO_LINEARS = ["Name the layers as Hugging Face's checkpoint does, so its weights load by name.",
                f"Linear ({api('nn.Linear')}) takes the input size, then the output size, and bias=True.",
                "Linear(in_dim, out_dim, bias=True): check the order and that the bias is on."]


def _table(rows: str) -> list[str]:
    return [f"One row per {rows}: a [{'vocab_size' if rows == 'token' else 'n_positions'}, n_embd] table, "
            "named weight, whose values the checkpoint replaces.",
            f"Tensor.zeros ({api('Tensor.zeros')}) makes a tensor of a given shape.",
            f"A zeros tensor of [config.{'vocab_size' if rows == 'token' else 'n_positions'}, config.n_embd], "
            "assigned to self.weight."]


HINTS: dict[str, dict[str, list[str]]] = {
    "01": _CONFIG,
    "02": {
        "no": ["Query i may attend to key j only when j is not in its future: a band on and below the diagonal.",
               f"F.band_part ({api('F.band_part')}) keeps a band of diagonals and, with exclude=True, zeroes it "
               f"and keeps the rest; F.broadcast_to ({api('F.broadcast_to')}) makes a [T, N + T] tensor of -inf.",
               "Start from [T, N + T] all -inf and zero the band: num_lower=None (every diagonal below), "
               "num_upper=num_tokens, exclude=True."],
        "with": ["With num_tokens cached keys, the mask has num_tokens + T columns and row i sees keys "
                 "0 .. num_tokens + i.",
                 f"Dim ({api('graph.Dim')}) adds to an int: Dim(sequence_length) + num_tokens columns.",
                 "The allowed band reaches num_tokens diagonals above the main one: num_upper=num_tokens."],
        "compiled": _COMPILED,
    },
    "03": {
        "construction": ["LayerNorm has a learned scale `weight` (gamma) and shift `bias` (beta), one per channel.",
                         f"Tensor.ones ({api('Tensor.ones')}) and Tensor.zeros ({api('Tensor.zeros')}) make them.",
                         "weight: ones of shape [dim]; bias: zeros of the same shape; eps kept as it is."],
        "forward": ["Normalise each token's vector on its own: statistics over the last axis only.",
                    f"Tensor.mean ({api('Tensor.mean')}) keeps the reduced axis; F.sqrt ({api('F.sqrt')}); "
                    f"or F.layer_norm ({api('F.layer_norm')}) does it all in one op.",
                    "(x - mean) / sqrt(var + eps) * weight + bias, with var the mean of the squared deviations."],
        "forward,": ["Tiny inputs make the variance tiny: where eps goes matters now.",
                     f"F.sqrt ({api('F.sqrt')}) of the variance plus eps, not the square root plus eps.",
                     "Divide by F.sqrt(var + self.eps)."],
    },
    "04": {
        "construction": [*_TWO_LINEARS[:2], "c_fc = Linear(n_embd, n_inner, bias=True); c_proj the other way."],
        "forward": ["c_fc, then the activation, then c_proj.",
                    f"F.gelu ({api('F.gelu')}) has an `approximate` argument: GPT-2 uses the tanh approximation.",
                    'self.c_proj(F.gelu(self.c_fc(x), approximate="tanh")).'],
    },
    "05": {
        "construction": _table("token"),
        "forward": ["Each token id selects one row of the table.",
                    f"F.gather ({api('F.gather')}) picks entries along an axis by index; the result keeps the "
                    "indices' shape and adds the row's.",
                    "Gather rows (axis 0) of self.weight with input_ids."],
    },
    "06": {
        "construction": _table("position"),
        "positions": ["Positions are 0, 1, ..., seq_len - 1 when nothing is cached.",
                      f"Tensor.arange ({api('Tensor.arange')}) makes the positions (int64, on the table's "
                      f"device); F.gather ({api('F.gather')}) takes their rows.",
                      "positions = Tensor.arange(start, stop, dtype=DType.int64, device=self.weight.device)."],
        "after": ["After past_length cached tokens, the new tokens sit at positions past_length onwards.",
                  f"Tensor.arange ({api('Tensor.arange')}): its second argument is where it stops, not a count.",
                  "Start at past_length, stop at past_length + seq_len."],
    },
    "07": {
        "construction": [*_TWO_LINEARS[:2], "c_attn maps n_embd -> 3 * n_embd; c_proj maps n_embd -> n_embd."],
        "_split_heads": ["Each head owns a contiguous block of head_dim channels.",
                         f"Tensor.reshape ({api('Tensor.reshape')}) splits an axis; Tensor.transpose "
                         f"({api('Tensor.transpose')}) swaps two axes.",
                         "Reshape [B, T, C] to [B, T, H, D], then swap the T and H axes."],
        "_merge_heads": ["_merge_heads undoes _split_heads, in reverse order.",
                         f"Tensor.transpose ({api('Tensor.transpose')}) first, then Tensor.reshape "
                         f"({api('Tensor.reshape')}).",
                         "Transpose [B, H, T, D] back to [B, T, H, D], then reshape to [B, T, H * D]."],
        "_attn": ["Scores: every query against every key of the same head, scaled, masked, softmaxed, then "
                  "the weighted sum of the values.",
                  f"`@` is matmul; Tensor.transpose ({api('Tensor.transpose')}) turns the keys; F.softmax "
                  f"({api('F.softmax')}) takes an axis.",
                  "q @ k^T / sqrt(head_dim) + causal_mask(T, 0, ...), softmax over the last axis (the keys), "
                  "then @ v."],
        "forward": ["c_attn, split into q, k, v, split the heads, attend, merge, c_proj.",
                    f"F.split ({api('F.split')}) cuts a tensor into pieces of given sizes along an axis.",
                    "c_attn's output holds q, k and v in that order, each n_embd wide: three pieces of "
                    "split_size on the last axis."],
        "compiled": _COMPILED,
    },
    "08": {
        "attention": ["GPT-2 is pre-norm: the sub-layer reads a normalised copy, the stream is left as it is.",
                      f"ln and sublayer are Modules ({api('nn.Module')}): call them like functions.",
                      "Add the sub-layer's output, on ln of the stream, to the stream that came in."],
        "MLP": ["The MLP half is wired exactly like the attention half.",
                f"The same residual_step serves both halves: what differs is the ln and the Module "
                f"({api('nn.Module')}) passed in.",
                "The stream that came in, plus sublayer of ln of it."],
    },
    "09": {
        "earlier": _EARLIER,
        "construction": ["A block holds ln_1, attn, ln_2 and mlp, named as in the checkpoint (h.0.ln_1...).",
                         f"Sub-modules are attributes of a Module ({api('nn.Module')}); your LayerNorm (step 03) "
                         "takes the width and eps, your attention and MLP the config.",
                         "LayerNorm(config.n_embd, eps=config.layer_norm_epsilon) twice, GPT2MultiHeadAttention(config), "
                         "GPT2MLP(config)."],
        "forward": ["Two residual halves: attention, then the MLP.",
                    f"Call the sub-modules ({api('nn.Module')}) through residual_step (step 08): ln_1 goes "
                    "with attn, ln_2 with mlp.",
                    "The second half reads the first half's output."],
    },
    "10": {
        "earlier": _EARLIER,
        "construction": ["GPT2Model holds wte, wpe, h (the blocks) and ln_f.",
                         f"ModuleList ({api('nn.ModuleList')}) holds modules and names them 0, 1, ...",
                         "self.h = ModuleList(GPT2Block(config) for each of the n_layer blocks)."],
        "forward": ["Token embeddings plus position embeddings, then every block in order, then ln_f.",
                    f"A [T, C] tensor adds to [B, T, C] by broadcasting; T is input_ids.shape[-1] "
                    f"({api('Tensor.shape')}).",
                    "self.wte(input_ids) + self.wpe(T); each block's output feeds the next; ln_f once."],
    },
    "11": {
        "earlier": _EARLIER,
        "loading": ["Hugging Face's Conv1D stores weights [in, out]; Linear wants [out, in].",
                    f"Module.load_state_dict ({api('nn.Module')}) takes {{name: array}}; numpy's .T transposes.",
                    "Transpose the weights of c_attn, c_proj and c_fc (not their biases, not the LayerNorms), "
                    "then load the whole dict at once."],
        "loading the original": ["Older GPT-2 files have no `transformer.` prefix, store the causal mask as "
                                 "attn.bias / attn.masked_bias, and store lm_head.weight.",
                                 f"Module.load_state_dict ({api('nn.Module')}) refuses names the model lacks; the "
                                 "check's message lists them.",
                                 "Skip the mask buffers and lm_head.weight; add the prefix where it is missing."],
        "logits": ["The head is tied: the same wte table turns vectors back into token scores.",
                   f"`@` is matmul; .T ({api('Tensor.T')}) turns [V, C] into [C, V].",
                   "The hidden states times wte's weight, transposed: [B, T, C] @ [C, V]; no softmax."],
        "compiled": _COMPILED + ["The lines under the part name the step whose piece changes when compiled: "
                                 "run that step's check."],
    },
    "12": {
        "encode/decode": ["The tokenizer does the work: encode gives an Encoding, decode gives text.",
                          f"tokenizers.Tokenizer ({TOKENIZER}): encode returns an Encoding with .ids.",
                          "The Encoding's ids; decode(ids) for the text."],
        "greedy": ["Run the model on all ids so far, take the last position's logits, pick the largest.",
                   f"Tensor.from_dlpack ({api('Tensor.from_dlpack')}) turns a numpy array of ids into a tensor; "
                   "np.from_dlpack turns the logits back.",
                   "Logits [1, T, V]: take [0, -1], np.argmax, append, yield, repeat."],
        "eos": ["generate stops when the model produces the end-of-text token, after handing it out.",
                f"A generator function ({PYTHON_YIELD}) ends with return; yield hands a value out first.",
                "Yield the token first, then return if it equals eos_token_id (None: never stop early)."],
        "top_k=1": ["Keep only the k highest logits before sampling: with k = 1 that is greedy.",
                    f"numpy's sort ({NUMPY_SORT}) gives the k-th largest value as the threshold.",
                    "Set every logit below the k-th largest to -inf."],
        "seeded": ["Make one generator per generate call: the same seed gives the same tokens.",
                   f"numpy's random Generator ({NUMPY_RANDOM}): np.random.default_rng(seed).",
                   "Make it once, before the loop, and draw every token from it, passing it to next_token."],
        "top_k": ["Exactly k logits survive: the k-th largest is the threshold, and it is kept.",
                  f"np.sort ({NUMPY_SORT}) ascending: the k-th largest is k from the end.",
                  "Everything below it becomes -inf before the softmax."],
        "distribution": ["Sample from softmax(logits / temperature) over the top k.",
                         f"Generator.choice ({NUMPY_RANDOM}) draws an index with given probabilities p.",
                         "Divide by the temperature, mask below the k-th best, softmax (minus the max first), "
                         "then rng.choice(V, p=probs)."],
    },
    "13": {
        "earlier": _EARLIER,
        "empty": ["Before the prompt nothing is cached: each layer's keys and values hold zero positions.",
                  f"Tensor.from_dlpack ({api('Tensor.from_dlpack')}) takes a numpy array, and numpy makes "
                  "arrays with an axis of length 0.",
                  "2 * n_layer float32 arrays of shape (batch_size, n_head, 0, n_embd // n_head), each made a Tensor."],
        "attention": ["The new tokens' keys and values join the cached ones; the new queries attend to all of them.",
                      f"F.concat ({api('F.concat')}) joins tensors along an axis; F.broadcast_to "
                      f"({api('F.broadcast_to')}) makes a [T, P] block from one 0.0, whatever P is.",
                      "Cache first, then new, along the positions axis (-2); mask = concat of zeros [T, P] and "
                      "causal_mask(T, 0), on the last axis; return (c_proj(merged), key, value)."],
        "model": ["Step 10's forward, but the new tokens sit after the cached ones, and each block's attention "
                  "reads and returns its layer's cache.",
                  f"Your step 06 wpe takes (seq_len, past_length); the cache's length is past_key.shape[-2] "
                  f"({api('Tensor.shape')}).",
                  "For block i: attention_with_cache(block.attn, block.ln_1(x), cache[2i], cache[2i+1]) gives the "
                  "half to add and the two new cache entries; logits from x[:, -1, :] after ln_f."],
        "compiled": _COMPILED + ["Compiled, the cache length is a symbol too: a mask built with band_part(..., "
                                 "num_upper=P) cannot be; build its cached columns from zeros."],
        "generate": ["The prompt goes through the model once; after that, each call gets only the newest token.",
                     f"Python's unpacking (https://docs.python.org/3/reference/expressions.html#expression-lists) "
                     "splits the model's result: the logits, then the cache.",
                     "Start from empty_cache(config, 1); ids = the prompt [1, T]; each turn: logits, *cache = "
                     "model(ids, *cache), pick, yield, then ids = [[token]]."],
        "eos": ["As in step 12: hand the end-of-text token out, then stop.",
                f"A generator function ({PYTHON_YIELD}) ends with return.",
                "Yield the token first, then return if it equals eos_token_id."],
        "seeded": ["As in step 12: one generator for the whole generation.",
                   f"numpy's random Generator ({NUMPY_RANDOM}): np.random.default_rng(seed), made once.",
                   "Make it before the loop and pass it to next_token for every token."],
    },
    "14": {
        "earlier": _EARLIER,
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
    },
    "15": {
        "earlier": _EARLIER,
        "kernel": ["Start simple: one task, one float at a time, y[n, m] = b[m] + the sum over k of "
                   "x[n, k] * w[m, k], with w's row m at m * K. Pass the kernel part first, then make it fast: "
                   "bands of w's rows for the tasks, a vector of floats per operation, a scalar loop for the tail.",
                   "Check each index against what it reads: x's row n starts at n * K, w's row m at m * K, y[n, m] "
                   "is at n * M + m and is written once, by one task; b[m] is added once, after the sum (a SIMD "
                   "accumulator started at b[m] adds it once per lane); the K % width columns after the last whole "
                   "vector are summed too. The Mojo manual's pointers (https://docs.modular.com/mojo/manual/"
                   "pointers/), MAX's custom ops (https://docs.modular.com/max/develop/build-custom-ops).",
                   "acc += wp.unsafe_load[width=W](m * K + k) * xp.unsafe_load[width=W](n * K + k) while "
                   "k + W <= K; then s = acc.reduce_add(), the tail for j in range(k, K), and y = s + b[m], once."],
        "decode": ["The kernel passed alone: what is left is which tensors go into it. Each KernelLinear must hold "
                   "its own Linear's weight and bias, and the head multiplies by wte's weight (tied).",
                   f"Module.children ({api('nn.Module')}) gives (name, child) pairs; setattr(module, name, "
                   f"KernelLinear(child)) replaces one; Tensor.reshape ({api('Tensor.reshape')}): [B, 1, C] to "
                   "[-1, C] for matvec, and back.",
                   "In forward: step 13's forward, with the last line's head as matvec(last, t.wte.weight)."],
        "timing": ["The timing part is a report: it passes whatever the speed.",
                   "Decode reads every weight once per token: tokens/s x weight bytes = the bandwidth you reach "
                   "(SIMD widths: https://docs.modular.com/mojo/std/builtin/simd/SIMD/).",
                   "Faster: more rows of w per pass (each load of x serves them), wider vectors, as many tasks "
                   "as the CPU has threads or a few more."],
    },
    "16": {
        "earlier": _EARLIER,
        "quantize": ["Each row of w [M, K] is cut into blocks of 32 columns (the last one K % 32 wide); each block "
                     "gets its own scale, max |w| / 127, and q = w / scale rounded to the nearest, as int8.",
                     "Pad the row with zeros to a multiple of 32 (a zero changes no block's max), reshape to "
                     "[M, KB, 32], take np.abs(...).max(axis=-1); divide where the scale is 0 by 1 instead. numpy's "
                     "rounding: np.rint (https://numpy.org/doc/stable/reference/generated/numpy.rint.html).",
                     "scales = amax / np.float32(127); q = np.clip(np.rint(blocks / safe[..., None]), -127, 127)"
                     ".astype(np.int8), reshaped back to [M, KB * 32] and cut to [M, K]."],
        "dequantize": ["Column k of a row belongs to block k // 32: its weight is q times that block's scale.",
                       "np.repeat(scales, 32, axis=1) gives every column its block's scale (cut it to K columns); "
                       "np.tile would repeat the whole row of scales instead "
                       "(https://numpy.org/doc/stable/reference/generated/numpy.repeat.html).",
                       "q.astype(np.float32) * np.repeat(scales, 32, axis=1)[:, :K]."],
        "quality": ["The quality part measures your quantize and dequantize on the whole model: when quantize "
                    "passes, this passes.",
                    "A KL several times the reference's comes from fewer scales (per row, per tensor) or from "
                    "rounding toward zero: each loses precision on every weight (the KL divergence: "
                    "https://en.wikipedia.org/wiki/Kullback%E2%80%93Leibler_divergence).",
                    "Blocks of 32 along K, each with max |w| / 127, and np.rint."],
        "kernel": ["Start from your step 15 kernel: the same tasks, the same x and y. A weight is now "
                   "q[m, k] * scales[m, k // 32]: sum x * q over a block, multiply that sum by the block's scale "
                   "once, and add the blocks up.",
                   "Check each index: x's row n at n * K and y[n, m] at n * M + m, as in step 15; q's row m at "
                   "m * K (bytes), scales' row m at m * KB with KB = "
                   "scales.dim_size(1) = ceil(K / 32), the last block's K % 32 columns with scales[m, KB - 1], "
                   "and no scale read for a last block when K % 32 == 0 (there is none: a NaN in the last outputs "
                   "says you read one); q is signed (DType.int8). SIMD casts: "
                   "https://docs.modular.com/mojo/std/builtin/simd/SIMD/.",
                   "For a whole block at k: qp.unsafe_load[width=16](m * K + k).cast[DType.float32]() times "
                   "xp.unsafe_load[width=16](n * K + k), twice (k and k + 16), summed, times sp[m * KB + k // 32]."],
        "decode": ["The kernel passed alone: what is left is which tensors go into it. Each QuantizedLinear holds "
                   "its own Linear's q, scales and bias; the head multiplies by wte's weight (tied), quantised.",
                   "np.from_dlpack(linear.weight) gives the weight as an array for quantize; Tensor.from_dlpack(q)"
                   f" gives it back to MAX ({api('Tensor.from_dlpack')}), .to(linear.weight.device) where it lives.",
                   "In forward: step 13's forward, with the last line's head as matvec_q8(last, head_q, "
                   "head_scales)."],
        "timing": ["The timing part is a report: it passes whatever the speed.",
                   "Decode reads every weight once per token: tokens/s x bytes per token = the bandwidth you "
                   "reach. int8 reads 1.125 bytes a weight, float32 4 (SIMD casts and fma: "
                   "https://docs.modular.com/mojo/std/builtin/simd/SIMD/).",
                   "Faster: each task reads its rows of q one after another, each from start to end, so it is "
                   "one stream through memory (step 15's several rows at once are several streams, and on int8 "
                   "they read at about two thirds of the bandwidth); whole blocks of 32 as two vectors of 16, "
                   "the scale applied once per block (an fma), as many tasks as the CPU has threads."],
    },
}

SOURCES: dict[str, dict[str, str]] = {
    "01": {field: f"GPT2Config.{field}" for field in _CONFIG},
    "02": {"no": "causal_mask", "with": "causal_mask", "compiled": "causal_mask"},
    "03": {"construction": "LayerNorm.__init__", "forward": "LayerNorm.forward", "forward,": "LayerNorm.forward"},
    "04": {"construction": "GPT2MLP.__init__", "forward": "GPT2MLP.forward"},
    "05": {"construction": "GPT2TokenEmbedding.__init__", "forward": "GPT2TokenEmbedding.forward"},
    "06": {"construction": "GPT2PositionEmbedding.__init__", "positions": "GPT2PositionEmbedding.forward",
           "after": "GPT2PositionEmbedding.forward"},
    "07": {"construction": "GPT2MultiHeadAttention.__init__", **{
        m: f"GPT2MultiHeadAttention.{m}" for m in ("_split_heads", "_merge_heads", "_attn", "forward")},
           "compiled": "GPT2MultiHeadAttention._attn"},
    "08": {"attention": "residual_step", "MLP": "residual_step"},
    "09": {"construction": "GPT2Block.__init__", "forward": "GPT2Block.forward"},
    "10": {"construction": "GPT2Model.__init__", "forward": "GPT2Model.forward"},
    "11": {"loading": "load_hf_weights", "loading the original": "load_hf_weights", "logits": "GPT2LMHeadModel.forward",
           "compiled": "GPT2LMHeadModel.forward"},
    "12": {"encode/decode": "encode", "greedy": "generate", "eos": "generate", "top_k=1": "next_token",
           "seeded": "generate", "top_k": "next_token", "distribution": "next_token"},
    "13": {"empty": "empty_cache", "attention": "attention_with_cache", "model": "GPT2WithCache.forward",
           "compiled": "attention_with_cache", "generate": "generate_with_cache", "eos": "generate_with_cache",
           "seeded": "generate_with_cache"},
    "14": {"ragged": "ragged_positions", "last": "last_rows", "paged": "GPT2Paged.forward", "served": "paged_attention"},
    "15": {"kernel": "matvec", "decode": "GPT2WithKernel.forward", "timing": "KernelLinear.forward"},
    "16": {"quantize": "quantize", "dequantize": "dequantize", "quality": "quantize", "kernel": "matvec_q8",
           "decode": "GPT2Quantized.forward", "timing": "QuantizedLinear.forward"},
}
STATE = paths.REPO / ".cache" / "hints.json"


def _key(table: dict[str, object], part: str) -> str | None:
    """The key of `table` for `part`: the part's name, or the longest key it starts with as words."""
    if part in table:
        return part
    fits = [k for k in table if part.startswith(k + " ") or part.startswith(k + ",")]
    return max(fits, key=len, default=None)


def hints_for(step: str, part: str) -> list[str]:
    key = _key(HINTS.get(step, {}), part)
    return HINTS[step][key] if key else []


def next_hint(step: str, part: str) -> str:
    """The next hint for `part` (the first, if the learner was on another part), numbered."""
    hints = hints_for(step, part)
    if not hints:
        return f"No hints are written for {part!r}."
    try:
        state = json.loads(STATE.read_text())
    except (OSError, ValueError):
        state = {}
    seen = state.get(step, {})
    level = seen["level"] + 1 if seen.get("part") == part else 1
    if level > len(hints):
        return (f"No more hints for {part} (all {len(hints)} shown above, last: {hints[-1]})\n"
                f"See the reference for this part: pixi run s{step} --solution")
    state[step] = {"part": part, "level": level}
    paths.save(STATE, lambda tmp: tmp.write_text(json.dumps(state, indent=1)))  # read-only: the next hint repeats
    more = "run again for the next one" if level < len(hints) else f"last one; pixi run s{step} --solution shows the code"
    return f"hint {level} of {len(hints)} for {part}: {hints[level - 1]}\n({more})"


def _find(tree: ast.Module, qualname: str) -> ast.AST | None:
    node: ast.AST = tree
    for name in qualname.split("."):
        node = next((n for n in getattr(node, "body", []) if _named(n) == name), None)
        if node is None:
            return None
    return node


def _named(node: ast.AST) -> str | None:
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        return node.name
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id
    return None


def reference_code(step: str, part: str) -> str | None:
    """The lines of the solution that `part` checks, or None if that part has no single piece of code."""
    key = _key(SOURCES.get(step, {}), part)
    if key is None:
        return None
    path = paths.step_file(step, solution=True)
    source = path.read_text()
    node = _find(ast.parse(source), SOURCES[step][key])
    if node is None:
        return None
    lines = source.splitlines()[node.lineno - 1 - len(getattr(node, "decorator_list", [])):node.end_lineno]
    return f"# {paths.shown(path)}, line {node.lineno}: {SOURCES[step][key]}\n" + "\n".join(lines)
