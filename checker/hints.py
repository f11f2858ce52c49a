"""Progressive hints, and the reference for one part: `--hint` and `--solution`.

    pixi run s07 --hint       the next hint for the first failing part (run again for the next one)
    pixi run s07 --solution   the solution's code for that part only

HINTS[step][part] goes from a nudge to nearly the answer. A part name that is
not a key is matched by its first word (step 06 names its parts after the
positions it asks for). SOURCES[step][part] names the solution code that part
checks: a function, `Class.method`, or `Class.field`. How far a learner has got
in the hints of a part is kept in .cache/hints.json.
"""

from __future__ import annotations

import ast
import json

from checker import paths

_CONFIG = {
    "vocab_size": ["How many different tokens can GPT-2 read? Its tokenizer's vocabulary decides.",
                   "Byte-level BPE: 256 byte tokens, 50,000 merges, and one special token.",
                   "256 + 50,000 + 1 (<|endoftext|>)."],
    "n_positions": ["The longest sequence GPT-2 small attends over: the rows of its position table.",
                    "It is a power of two between 512 and 2048."],
    "n_embd": ["The width of the residual stream: each token is a vector this long.",
               "GPT-2 small (124M parameters) has 12 heads of 64 channels each."],
    "n_layer": ["How many transformer blocks are stacked in GPT-2 small?",
                "The checkpoint has blocks h.0 to h.11."],
    "n_head": ["How many attention heads per block?", "n_embd / n_head = 64 channels per head."],
    "n_inner": ["The width of the MLP's hidden layer.", "GPT-2's MLP widens each token by a factor of 4."],
    "layer_norm_epsilon": ["The small number LayerNorm adds to the variance so it never divides by zero.",
                           "It is in the checkpoint's config.json: layer_norm_epsilon."],
}
_EARLIER = ["An earlier step that your file imports fails its own check; this step cannot pass before it does.",
            "Run the check the details name (pixi run sNN) and fix that step first."]
_COMPILED = ["Op by op your code is right; compiled into a graph, as pixi run gpt2 runs it, it is not.",
             "Compiled, the batch and the length are symbols (Dim), not numbers: keep them Dims; no int(), "
             "range() or numpy on them.",
             "A mask from a column and a row of positions compared (arange, <=) is miscompiled by MAX 26.7 "
             "(python -m checker.max_bugs): build it with F.band_part."]
_CONSTRUCTION = ["Name the layers as Hugging Face's checkpoint does, so its weights load by name.",
                 "Linear(in_features, out_features, bias=True): check the order and that the bias is on."]

HINTS: dict[str, dict[str, list[str]]] = {
    "01": _CONFIG,
    "02": {
        "no": ["Query i may attend to key j only when j is not in its future.",
               "Start from a [T, T] tensor full of -inf and keep -inf only above the diagonal.",
               "F.band_part(x, num_lower, num_upper, exclude=True) sets the band to 0 and keeps the rest."],
        "with": ["With num_tokens cached keys, the mask has num_tokens + T columns and row i sees keys "
                 "0 .. num_tokens + i.",
                 "The allowed band reaches num_tokens diagonals above the main one: num_upper=num_tokens."],
        "compiled": _COMPILED,
    },
    "03": {
        "construction": ["LayerNorm has a learned scale `weight` (gamma) and shift `bias` (beta), one per channel.",
                         "Tensor.ones([dim]) and Tensor.zeros([dim]); keep eps as an attribute."],
        "forward": ["Normalise each token's vector on its own: statistics over the last axis only.",
                    "y = (x - mean) / sqrt(var + eps), with var the mean of squared deviations (divide by n).",
                    "Then scale and shift: y * weight + bias. Reductions in MAX keep the reduced axis."],
        "forward,": ["Tiny inputs make the variance tiny: where eps goes matters now.",
                     "eps belongs inside the square root: sqrt(var + eps)."],
    },
    "04": {
        "construction": _CONSTRUCTION + ["c_fc widens n_embd -> n_inner; c_proj narrows it back."],
        "forward": ["c_fc, then the activation, then c_proj.",
                    "GPT-2's activation is GELU in its tanh approximation.",
                    'F.gelu(x, approximate="tanh").'],
    },
    "05": {
        "construction": ["One row per token id: the table is [vocab_size, n_embd], named weight."],
        "forward": ["Each token id selects one row of the table.",
                    "Gather rows along axis 0; the result keeps the ids' [B, T] shape and adds C.",
                    "F.gather(self.weight, input_ids, axis=0)."],
    },
    "06": {
        "construction": ["One row per position: the table is [n_positions, n_embd], named weight."],
        "positions": ["Positions are 0, 1, ..., seq_len - 1 when nothing is cached.",
                      "Make the positions with Tensor.arange, then gather those rows of the table."],
        "after": ["After past_length cached tokens, the new tokens sit at positions past_length onwards.",
                  "Tensor.arange(past_length, past_length + seq_len, ...): the second argument is the end."],
    },
    "07": {
        "construction": _CONSTRUCTION + ["c_attn makes q, k and v at once: n_embd -> 3 * n_embd. "
                                         "c_proj maps n_embd -> n_embd."],
        "_split_heads": ["Each head owns a contiguous block of head_dim channels.",
                         "Reshape [B, T, C] to [B, T, H, D], then bring the head axis in front of the tokens.",
                         "tensor.reshape([..., num_heads, attn_head_size]).transpose(1, 2)."],
        "_merge_heads": ["_merge_heads undoes _split_heads, in reverse order.",
                         "Transpose [B, H, T, D] back to [B, T, H, D], then reshape to [B, T, H * D]."],
        "_attn": ["Scores: every query against every key of the same head, scaled.",
                  "q @ k^T / sqrt(head_dim), plus causal_mask(T, 0, ...) before the softmax.",
                  "softmax over the last axis (the keys), then @ v."],
        "forward": ["c_attn, split into q, k, v, split the heads, attend, merge, c_proj.",
                    "c_attn's output holds q, k and v in that order, each n_embd wide: "
                    "F.split(x, [C, C, C], axis=-1).",
                    "If _split_heads, _merge_heads and _attn pass, look at the order of q, k, v and at c_proj."],
        "compiled": _COMPILED,
    },
    "08": {
        "attention": ["GPT-2 is pre-norm: the sub-layer reads a normalised copy, the stream is left as it is.",
                      "Add the sub-layer's output to the stream that came in.",
                      "return hidden_states + sublayer(ln(hidden_states))."],
        "MLP": ["The MLP half is wired exactly like the attention half.",
                "return hidden_states + sublayer(ln(hidden_states))."],
    },
    "09": {
        "earlier": _EARLIER,
        "construction": ["A block holds ln_1, attn, ln_2 and mlp, named as in the checkpoint (h.0.ln_1...).",
                         "LayerNorm(n_embd, eps=layer_norm_epsilon), your attention and your MLP."],
        "forward": ["Two residual halves: attention, then the MLP.",
                    "ln_1 goes with attn, ln_2 with mlp; the MLP half reads the stream after attention was added.",
                    "Use residual_step twice."],
    },
    "10": {
        "earlier": _EARLIER,
        "construction": ["GPT2Model holds wte, wpe, h (a ModuleList of n_layer blocks) and ln_f.",
                         "ModuleList(GPT2Block(config) for _ in range(config.n_layer))."],
        "forward": ["Token embeddings plus position embeddings, then every block in order, then ln_f.",
                    "self.wte(input_ids) + self.wpe(seq_len): [B, T, C] + [T, C] broadcasts.",
                    "Feed each block's output to the next; ln_f runs once, at the end."],
    },
    "11": {
        "earlier": _EARLIER,
        "loading": ["Hugging Face's Conv1D stores weights [in, out]; Linear wants [out, in].",
                    "Transpose the weights of c_attn, c_proj and c_fc (not their biases, not the LayerNorms).",
                    "Then model.load_state_dict(state) with the `transformer.` names."],
        "loading the original": ["Older GPT-2 files have no `transformer.` prefix, store the causal mask as "
                                 "attn.bias / attn.masked_bias, and store lm_head.weight.",
                                 "Skip the mask buffers and lm_head.weight; add the prefix where it is missing."],
        "logits": ["The head is tied: the same wte table turns vectors back into token scores.",
                   "hidden_states @ wte.weight.T: [B, T, C] @ [C, V] -> [B, T, V]; no softmax."],
        "compiled": _COMPILED + ["The lines under the part name the step whose piece changes when compiled: "
                                 "run that step's check."],
    },
    "12": {
        "encode/decode": ["The tokenizer does the work: encode gives an Encoding, decode gives text.",
                          "tokenizer.encode(text).ids and tokenizer.decode(ids)."],
        "greedy": ["Run the model on all ids so far, take the last position's logits, pick the largest.",
                   "Append the new id and go again; yield each new id as it is made.",
                   "np.from_dlpack(model(ids_tensor))[0, -1], then np.argmax."],
        "eos": ["generate stops when the model produces the end-of-text token, after handing it out.",
                "yield the token first, then return if it equals eos_token_id (None: never stop early)."],
        "top_k=1": ["Keep only the k highest logits before sampling: with k = 1 that is greedy.",
                    "Set every logit below the k-th largest to -inf."],
        "seeded": ["Make one generator per generate call: np.random.default_rng(seed).",
                   "Make it once, before the loop, and draw every token from it, passing it to next_token."],
        "top_k": ["Exactly k logits survive: the k-th largest is the threshold, and it is kept.",
                  "np.sort(logits)[-top_k] is the k-th largest; everything below it becomes -inf."],
        "distribution": ["Sample from softmax(logits / temperature) over the top k.",
                         "Divide by the temperature, mask below the k-th best, softmax, then rng.choice(V, p=probs)."],
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
    try:
        STATE.parent.mkdir(parents=True, exist_ok=True)
        STATE.write_text(json.dumps(state, indent=1))
    except OSError:
        pass  # a read-only checkout: the hint is still shown, the next one repeats it
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
