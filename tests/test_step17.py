"""Step 17: the check on the solution and the skeleton; the kernel judge against the outputs and caches each
catalogued mistake leaves (the Mojo edits themselves are injected in tests/test_catalogue.py); the numpy
online softmax equal to attention however it cuts the keys."""

import numpy as np
import pytest

from checker.reporting.compare import compare
from checker.reporting.report import FAIL, PASS, SKIP, TODO
from checker.running.mojo import REPEATS
from checker.steps.step17 import check as step17
from checker.steps.step17 import kernel as step17_kernel
from checker.steps.step17.kernel import FLOAT16_CACHES
from checker.steps.step17.mistakes import (
    CATALOGUE,
    CUT,
    LAST_TILE,
    MAX_FROM_ZERO,
    NO_RESCALE,
    SPLITS_WITHOUT_MAXIMA,
    output,
)
from checker.steps.step17.reference import (
    EXP_FLOOR,
    KERNEL,
    attend,
    attention,
    expected,
    kernel_cases,
    online,
    written,
)
from runtime.paths import REPO
from tests.conftest import (
    STANDINS,
    add_kernel,
    assert_passes_with_margin,
    mutate,
    solution_source,
    write_kernel_step,
)


def _results(outputs: dict[str, tuple]) -> dict[str, np.ndarray]:
    """What run_kernel returns for a kernel that computed `outputs` ({name: (output, k_cache, v_cache)}) every
    run: {name: [R, B, H, T, D], name#3 / name#4: the caches after each run}."""
    results = {}
    for name, (out, kc, vc) in outputs.items():
        for key, array in ((name, out), (f"{name}#3", kc), (f"{name}#4", vc)):
            results[key] = np.stack([np.asarray(array, np.float32)] * REPEATS)
    return results


def _said(part) -> str:
    return "\n".join([part.summary, *part.details])


@pytest.mark.heavy
@pytest.mark.xdist_group("step17-solution")  # one worker: the second stand-in reuses the first's compiles
@pytest.mark.parametrize("standin, cache", list(zip(STANDINS, ("float16", "float32"))))
def test_solution_passes_with_margin(checkpoints, record_property, step_folder, standin, cache):
    """The solution (float16 caches) on one stand-in, and with float32 caches on the other: a learner may keep
    either, and the kernel, the model and the int8 decode are judged on that dtype."""
    path = step_folder / "step_17.py"
    path.write_text(mutate(solution_source("17"), "CACHE_DTYPE = DType.float16", f"CACHE_DTYPE = DType.{cache}"))
    add_kernel(path, "17")
    report = step17.check(path, checkpoints[standin])
    assert_passes_with_margin(report, "17", standin, record_property)
    assert "step 13" in report.part("timing").summary, report.render()
    assert f"MB ({cache})" in report.render(), report.render()  # the timing part read the learner's dtype


@pytest.mark.heavy
def test_skeleton_kernel_behind_a_finished_python_is_todo_with_mojos_words(checkpoints, step_folder):
    """The skeleton's kernel (float32 caches) behind the solution's Python: with float32 caches, TODO in
    Mojo's words; with the solution's float16 ones, MAX cannot build the op, and the report says how to
    declare caches of either dtype."""
    mojo = (REPO / "steps" / "step_17_kernel" / "flash.mojo").read_text()
    path = write_kernel_step(step_folder, mojo, "17")
    report = step17.check(path, checkpoints["synthetic"])
    kernel = report.part("kernel")
    assert kernel.status == FAIL and FLOAT16_CACHES in kernel.details, report.render()
    path.write_text(mutate(path.read_text(), "CACHE_DTYPE = DType.float16", "CACHE_DTYPE = DType.float32"))
    report = step17.check(path, checkpoints["synthetic"])
    kernel = report.part("kernel")
    assert kernel.status == TODO, report.render()
    assert "raised: step 17: not implemented yet" in kernel.summary, kernel.summary
    assert report.part("model").status == SKIP, report.render()


@pytest.mark.heavy
def test_a_model_off_outside_the_kernel_is_placed_at_its_piece_and_step(checkpoints, step_folder):
    """GPT2Flash's positions without the cached ones: the prompt is right, each decode step's embeddings are not,
    and the report says so, piece and decode step, before anything is compiled."""
    path = step_folder / "step_17.py"
    path.write_text(mutate(solution_source("17"), ", device=input_ids.device) + past", ", device=input_ids.device)"))
    add_kernel(path, "17")
    report = step17.check(path, checkpoints["synthetic"])
    model, text = report.part("model"), report.render()
    assert report.part("kernel").status == PASS and model.status == FAIL, text
    assert "run op by op" in model.summary, text
    assert ("where: everything before matches Hugging Face; the embeddings: the stream into block 0 is not "
            "wte(token) + wpe's row at the token's position") in text, text
    assert "off on the decode steps at positions 9, 10" in text, text


@pytest.mark.heavy
def test_keys_the_kernel_is_handed_wrong_are_said_by_the_cache_check(checkpoints, step_folder):
    """GPT2Flash handing the kernel q for k: Hugging Face fed the caches attends as the learner does, so the
    logits agree; the caches are not Hugging Face's keys, and the model part says which."""
    path = step_folder / "step_17.py"
    wrong = mutate(solution_source("17"), "heads = flash_attention(q, k, v,", "heads = flash_attention(q, q, v,")
    path.write_text(wrong)
    add_kernel(path, "17")
    report = step17.check(path, checkpoints["synthetic"])
    model, text = report.part("model"), report.render()
    assert report.part("kernel").status == PASS and model.status == FAIL, text
    assert "block 0's key cache does not hold Hugging Face's keys at positions 0 .. 10: it holds the queries, so " \
           "the kernel was handed q where k belongs" in model.summary, text


def test_the_skeleton_python_is_todo(checkpoint):
    report = step17.check(REPO / "steps" / "step_17.py", checkpoint)
    assert not report.ok and any(p.status == TODO for p in report.parts), report.render()


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_the_right_outputs_pass_and_each_mistake_is_named_from_its_outputs(dtype):
    """The judge on what a kernel computes, on caches of either dtype a learner may keep: the right outputs
    and caches pass with the margin the solution keeps; each catalogued mistake's are named as it, however
    the kernel cuts the keys for CUT's."""
    inputs = step17_kernel.arrays(np.dtype(dtype))
    assert all(a[3].dtype == dtype and a[4].dtype == dtype for a in inputs.values())
    right = step17_kernel.judge(inputs, _results({name: expected(*a) for name, a in inputs.items()}))
    assert right.status == PASS and right.margin < 0.01, right
    for mistake in CATALOGUE:
        for tile, splits in ((64, 2), (16, 3)) if mistake in CUT else ((64, 2),):
            tile = 1 if mistake is SPLITS_WITHOUT_MAXIMA else tile  # its parts' softmax exact: the tile is moot
            results = _results({name: output(mistake, a, tile, splits) for name, a in inputs.items()})
            part = step17_kernel.judge(inputs, results)
            assert part.status == FAIL and part.mistake is mistake, (mistake.id, tile, splits, _said(part))


@pytest.mark.parametrize("mistake", [SPLITS_WITHOUT_MAXIMA, NO_RESCALE], ids=lambda m: m.id)
def test_a_mistake_is_named_when_the_kernel_splits_to_fill_the_cores(mistake):
    """The solution's kernel splits a decode head's keys to fill the cores: ceil(cores / (B x H)) parts, at
    most one a tile of 64, so on 2 cores a head alone is split in two and GPT-2's twelve heads are not. A
    mistake computed that way (here, not by the catalogue's own cutting) is named."""
    inputs = step17_kernel.arrays()
    computed = {}
    for name, (q, k, v, kc, vc, past) in inputs.items():
        P, (B, H, T, _) = int(past[0]), q.shape
        parts = 1 if T > 1 else max(1, min(-(-2 // (B * H)), -(-(P + 1) // 64)))
        kc, vc = written(k, v, kc, vc, P)
        flags = dict(maxima=False) if mistake is SPLITS_WITHOUT_MAXIMA else dict(rescale_l=False, rescale_acc=False)
        computed[name] = (online(q, kc, vc, P, 64, parts, **flags), kc, vc)
    part = step17_kernel.judge(inputs, _results(computed))
    assert part.status == FAIL and part.mistake is mistake, _said(part)


def test_a_maximum_from_zero_is_named_where_exp_gives_its_least_value_not_0():
    """Mojo's exp on 16 lanes without a denormal flush gives 4.156e-39, not 0, below about -88: a maximum
    started at 0 then weights the far-below-0 case's keys alike (tile by tile, their scalar tails 0), a
    finite output, not NaN. Computed so (not by the catalogue's own cutting), it is named all the same."""
    inputs = step17_kernel.arrays()
    computed = {}
    for name, (q, k, v, kc, vc, past) in inputs.items():
        P = int(past[0])
        kc, vc = written(k, v, kc, vc, P)
        computed[name] = (online(q, kc, vc, P, 64, 1, start=0.0, floor=EXP_FLOOR), kc, vc)
    negative = next(case[0] for case in kernel_cases() if case[-1] < 0)
    assert np.isfinite(computed[negative][0]).all()
    part = step17_kernel.judge(inputs, _results(computed))
    assert part.status == FAIL and part.mistake is MAX_FROM_ZERO, _said(part)


def _uncatalogued(compute) -> dict[str, np.ndarray]:
    """run_kernel's results for a kernel that writes the caches right and computes `compute(q, kc, vc, P)`."""
    computed = {}
    for name, (q, k, v, kc, vc, past) in step17_kernel.arrays().items():
        kc, vc = written(k, v, kc, vc, int(past[0]))
        computed[name] = (compute(q, kc, vc, int(past[0])), kc, vc)
    return _results(computed)


@pytest.mark.parametrize("factor, reading", [(1 / 64, "= q . k / sqrt(D)^2"), (0.3 / 8, "0.3x them")])
def test_scores_scaled_by_another_factor_are_told_by_the_factor(factor, reading):
    """A kernel whose scores are q . k times some other factor than 1 / sqrt(D) (scaled twice, or by a constant
    of its own) is told the factor it used, fitted to its output, and GPT-2's."""
    results = _uncatalogued(lambda q, kc, vc, P: attention(q, kc, vc, P, scale=factor))
    part = step17_kernel.judge(step17_kernel.arrays(), results)
    said = _said(part)
    assert part.status == FAIL and part.mistake is None and f"q . k x {factor:.3g}" in said, said
    assert reading in said and "GPT-2's are q . k / sqrt(D) = q . k x 0.125" in said, said


def test_a_kernel_right_on_the_first_head_only_is_told_where_heads_start():
    """Every head but each case's first attends over the first head's keys (a head's offset in memory
    forgotten): the judge says the first head is right and where a head's numbers start."""
    def first_heads_keys(q, kc, vc, P):
        return attention(q, np.broadcast_to(kc[:1, :1], kc.shape), np.broadcast_to(vc[:1, :1], vc.shape), P)

    part = step17_kernel.judge(step17_kernel.arrays(), _uncatalogued(first_heads_keys))
    said = _said(part)
    assert part.status == FAIL and "right on each case's first head (b = 0, h = 0), off on the others" in said, said
    assert "right on: decode P=100, one head" in said, said


def test_exp_not_shifted_by_the_maximum_is_told_by_where_the_nan_is():
    """exp(s) in float32 without the running maximum: inf above 88, 0 far below 0, so NaN on exactly the cases
    of large or far negative scores; the judge says so."""
    def unshifted(q, kc, vc, P):
        T, Dh = q.shape[2], q.shape[3]
        s = (q @ kc[:, :, :P + T].swapaxes(-1, -2)).astype(np.float32) / np.float32(np.sqrt(Dh))
        s = np.where(np.arange(P + T)[None, :] > (P + np.arange(T))[:, None], -np.inf, s)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            w = np.exp(s)
            return (w @ vc[:, :, :P + T]) / w.sum(-1, keepdims=True)

    part = step17_kernel.judge(step17_kernel.arrays(), _uncatalogued(unshifted))
    said = _said(part)
    assert part.status == FAIL and "NaN in the output only where the scores are large or far below 0" in said, said
    assert "overflows to inf" in said, said


def test_a_race_from_writing_the_cache_at_the_wrong_position_is_told_by_the_caches():
    """A kernel that stores the new key at position t instead of P + t reads at decode what another split is
    writing, so its output varies between runs: the judge says where the caches were written, first."""
    inputs = step17_kernel.arrays()
    computed = {}
    for name, (q, k, v, kc, vc, past) in inputs.items():
        T = q.shape[2]
        want, _, _ = expected(q, k, v, kc, vc, past)
        kc, vc = kc.copy(), vc.copy()
        kc[:, :, :T], vc[:, :, :T] = k, v  # at 0 .. T-1
        computed[name] = (want, kc, vc)
    results = _results(computed)
    raced = kernel_cases()[4][0]  # decode P=100, one head: its keys split
    results[raced][1] += 0.5
    part = step17_kernel.judge(inputs, results)
    said = _said(part)
    assert part.status == FAIL and "different outputs" in part.summary, said
    assert part.details[0].startswith(f"k_cache differs at positions 0, 100 on {raced}"), said
    assert "write the new keys and values at P .. P+T-1 and nowhere else" in said, said


def test_a_first_token_from_the_wrong_position_is_told_by_the_prompts_logits(checkpoint):
    """A forward that returns the logits of the prompt's first position, not its last, picks a wrong first
    token while every decode step (one position) is right: the reference says whose logits the prompt's
    pass gave, from the logits greedy_steps keeps of it."""
    import torch

    from checker.steps.step15.decode import DecodeReference
    from runtime.hf import load_hf_model

    prompt = [5, 17, 3, 250, 9]
    reference = DecodeReference(load_hf_model(checkpoint), prompt)
    with torch.no_grad():
        theirs = reference.hf(torch.tensor([prompt])).logits[0].double().numpy()  # [5, V]
    assert int(theirs[0].argmax()) != reference.theirs[0]  # else this case cannot tell
    ids = [int(theirs[0].argmax()), *reference.theirs[1:3]]
    problems = reference.problems(ids, [np.zeros(theirs.shape[-1])] * 2, [theirs[0]])[1]
    said = "\n".join(problems)
    assert "the prompt's pass, whose logits pick new token 0" in said, said
    assert "they are its logits at position 0 of the 5" in said, said
    assert reference.prompt_problem(theirs[-1], ids) is None


def test_float32_rounding_passes_and_a_hundredth_fails():
    """The tolerance: the online softmax in float32 (the solution's arithmetic) passes with a tenth of what
    it allows; the right output off by a hundredth of its scale on one query fails, said as that case."""
    inputs = step17_kernel.arrays()
    computed = {}
    for name, (q, k, v, kc, vc, past) in inputs.items():
        kc, vc = written(k, v, kc, vc, int(past[0]))
        computed[name] = (online(q, kc, vc, int(past[0]), 64, 2 if q.shape[2] == 1 else 1), kc, vc)
    part = step17_kernel.judge(inputs, _results(computed))
    assert part.status == PASS and part.margin < 0.1, part
    name = kernel_cases()[1][0]
    output = computed[name][0].copy()
    output[1, 2, 3] += 0.01 * np.abs(output).max()
    computed[name] = (output, *computed[name][1:])
    part = step17_kernel.judge(inputs, _results(computed))
    assert part.status == FAIL and part.mistake is None and "off on 1 of" in part.summary, _said(part)
    assert name in " ".join(part.details), _said(part)


def test_a_race_a_stray_write_and_nan_are_each_said():
    inputs = step17_kernel.arrays()
    right = {name: expected(*a) for name, a in inputs.items()}
    name = kernel_cases()[4][0]

    raced = _results(right)
    raced[name][1] += 1e-3  # the second of three runs differs
    part = step17_kernel.judge(inputs, raced)
    assert part.status == FAIL and f"different outputs in {REPEATS} runs" in part.summary, _said(part)
    _, B, H, T, *_ = kernel_cases()[4]
    first = "has not stored yet" if T > 1 else "a split reads the new position P" if B * H == 1 else \
        "the same place at once"
    assert first in part.details[0], _said(part)
    prefill = next(case[0] for case in kernel_cases() if case[3] > 1)  # a race at prefill alone: read too early
    raced = _results(right)
    raced[prefill][1] += 1e-3
    part = step17_kernel.judge(inputs, raced)
    assert part.details[0].startswith("only where T > 1 (a prefill): a task reads keys"), _said(part)
    decode = next(case[0] for case in kernel_cases() if case[3] == 1)
    raced[decode][1] += 1e-3
    part = step17_kernel.judge(inputs, raced)
    assert part.details[0].startswith("two tasks write"), _said(part)

    stray = _results(right)
    stray[f"{name}#4"][:, 0, 0, 5] = 7.0  # a cached position of v_cache written over
    part = step17_kernel.judge(inputs, stray)
    said = _said(part)
    assert part.status == FAIL and "v_cache differs at positions 5" in said and "a write outside them" in said, said

    nan = _results(right)
    nan[name][:, 0, 0, 0, :] = np.nan
    part = step17_kernel.judge(inputs, nan)
    assert part.status == FAIL and "NaN in the output" in _said(part), _said(part)


@pytest.mark.parametrize("tile", [1, 7, 64, 1000])
@pytest.mark.parametrize("splits", [1, 3])
def test_the_online_softmax_is_attention_however_the_keys_are_cut(tile, splits):
    """The reference the mistakes are built on: done right, it is attention in float32's rounding, for a
    tile larger than the keys, a tile that divides nothing, and keys split in parts."""
    for name, (q, k, v, kc, vc, past) in step17_kernel.arrays().items():
        P = int(past[0])
        kc, vc = written(k, v, kc, vc, P)
        got = online(q, kc, vc, P, tile, splits).astype(np.float64)
        verdict = compare(got, attention(q, kc, vc, P), axes=step17_kernel.AXES, mistakes=[], tol=KERNEL)
        assert verdict.ok and verdict.margin < 0.1, (name, verdict.summary)


def test_one_tensor_listed_as_every_cache_is_said(checkpoint):
    """empty_flash_cache returning one tensor 2L times: the kernel writes in place, so the caches are one."""
    from max.experimental.tensor import Tensor

    from checker.steps.step17.model import _caches_problem

    config = checkpoint.learner_config()
    shape = (1, config.n_head, config.n_positions, config.n_embd // config.n_head)
    one = Tensor.from_dlpack(np.zeros(shape, np.float32))
    f32 = np.dtype(np.float32)
    assert _caches_problem([one] * (2 * config.n_layer), config, f32).startswith(
        f"empty_flash_cache returned {2 * config.n_layer} caches but only 1 distinct tensor:")
    assert _caches_problem([Tensor.from_dlpack(np.zeros(shape, np.float32)) for _ in range(2 * config.n_layer)],
                           config, f32) is None
    mixed = [Tensor.from_dlpack(np.zeros(shape, np.float16 if i == 0 else np.float32))
             for i in range(2 * config.n_layer)]
    assert "empty_flash_cache's cache 1 is float32" in _caches_problem(mixed, config, np.dtype(np.float16))


def test_the_reference_rounds_keys_and_values_as_a_float16_cache_holds_them(checkpoint):
    """rounded: inside, Hugging Face's keys and values rounded to float16 as they leave c_attn, its queries not;
    outside, and for a float32 cache, the model as it was."""
    import torch

    from checker.steps.step17.model import rounded
    from runtime.hf import load_hf_model

    hf = load_hf_model(checkpoint)
    x = torch.randn(1, 3, hf.config.n_embd)
    c_attn, C = hf.transformer.h[0].attn.c_attn, hf.config.n_embd
    plain = c_attn(x)
    with rounded(hf, np.dtype(np.float32)):
        assert torch.equal(c_attn(x), plain)
    with rounded(hf, np.dtype(np.float16)):
        inside = c_attn(x)
    assert torch.equal(inside[..., :C], plain[..., :C])
    assert torch.equal(inside[..., C:], plain[..., C:].half().float())
    assert not torch.equal(inside, plain)
    assert torch.equal(c_attn(x), plain)


def _caches_of(hf, ids: list[int], dtype) -> tuple[list, list[np.ndarray]]:
    """`hf`'s keys and values for `ids`, as a learner's caches 2L x [1, H, N, D] of `dtype` hold them:
    the Tensors, and the numpy arrays they share memory with."""
    import torch
    from max.experimental.tensor import Tensor

    config = hf.config
    H, D = config.n_head, config.n_embd // config.n_head
    caches = [np.zeros((1, H, config.n_positions, D), dtype) for _ in range(2 * config.n_layer)]
    past = hf(torch.tensor([ids]), use_cache=True).past_key_values
    for i in range(config.n_layer):
        k, v = (t.numpy() for t in (past.layers[i].keys, past.layers[i].values))  # [1, H, T, D]
        caches[2 * i][:, :, :len(ids)], caches[2 * i + 1][:, :, :len(ids)] = k, v
    return [Tensor.from_dlpack(c) for c in caches], caches


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_hugging_face_fed_its_own_caches_computes_its_logits_and_a_wrong_cache_is_said(checkpoint, dtype):
    """fed: Hugging Face attending over caches holding its own keys and values gives its own logits, those of
    its keys and values rounded as the caches' dtype holds them (the rounding alone moves the synthetic
    checkpoint's logits 7e-3, near DECODE: the check compares with the same rounding, never with plain float32);
    `cached` passes those caches, and says which block's which cache holds keys off (a learner storing q for k:
    the logits of a fed Hugging Face cannot show it)."""
    import torch

    from checker.reporting.compare import DECODE
    from checker.steps.step17.model import cached, fed, rounded
    from runtime.hf import load_hf_model

    hf = load_hf_model(checkpoint)
    ids = np.random.default_rng(0).integers(0, 400, 12).tolist()
    with rounded(hf, np.dtype(dtype)):
        alike = hf(torch.tensor([ids])).logits[0].double().numpy()
        caches, arrays = _caches_of(hf, ids, dtype)
    with fed(hf, caches, len(ids)) as own:
        logits = hf(torch.tensor([ids])).logits[0].double().numpy()
    verdict = compare(logits, alike, axes=("position", "vocab"), mistakes=[], tol=DECODE)
    assert verdict.ok and verdict.margin < 0.1, verdict.summary
    assert sorted(own) == list(range(hf.config.n_layer)) and own[0][0].shape == (len(ids), hf.config.n_embd)
    problem, margin, _ = cached(caches, own, np.dtype(dtype))
    assert problem is None and margin < 0.1, margin
    arrays[2][0, :, 5] *= 1.05  # block 1's keys at position 5, 5% off
    problem, _, _ = cached(caches, own, np.dtype(dtype))
    assert problem.startswith("block 1's key cache does not hold Hugging Face's keys at positions 0 .. 11"), problem
    assert "position 5" in problem and "it holds" not in problem, problem
    H, T = hf.config.n_head, len(ids)
    arrays[2][0, :, :T] = own[1][2].reshape(T, H, -1).transpose(1, 0, 2)  # block 1's queries where its keys go
    problem, _, _ = cached(caches, own, np.dtype(dtype))
    assert "block 1's key cache does not hold Hugging Face's keys at positions 0 .. 11: it holds the queries, so " \
           "the kernel was handed q where k belongs" in problem, problem
    with fed(hf, caches, len(ids)):
        pass
    plain = hf(torch.tensor([ids])).logits[0].double().numpy()
    assert np.array_equal(plain, alike) == (dtype == np.float32)  # the hooks gone


def test_where_greedy_ids_part_is_said_with_both_windows_alike():
    from checker.steps.step15.decode import ids_differ

    assert ids_differ([1, 2, 9, 9, 9, 9, 9], [1, 2, 3, 4, 5, 6, 7]) == (
        "greedy ids differ from transformers' from new token 2 (counted from 0): new tokens 2..5, yours [9, 9, 9, 9], "
        "transformers' [3, 4, 5, 6]")
    assert ids_differ([1, 2], [1, 2, 3]).endswith("new tokens 2..2, yours [], transformers' [3]")


def test_int8_skipped_behind_a_failing_step_16_names_its_first_part_not_passing(checkpoint, tmp_path, monkeypatch):
    """GPT2FlashQ8 waits for step 16; the skip says which of step 16's parts to look at, not only that it fails."""
    from types import SimpleNamespace

    from checker.harness import verdicts
    from checker.harness.runner import StepRun
    from checker.steps.step17.model import int8_part

    (tmp_path / "step_16.py").write_text("")
    monkeypatch.setattr(verdicts, "lookup", lambda *_: {"ok": False, "parts": [["quantize", PASS], ["kernel", FAIL]]})
    run = StepRun("17", "FlashAttention", tmp_path / "step_17.py", checkpoint, "", ["int8"], timeout=60)
    part = int8_part(run, SimpleNamespace(GPT2FlashQ8=object), None, tmp_path / "step_17.py", checkpoint, np.float32)
    assert part.status == SKIP and part.optional, part
    assert "does not pass its check yet: its first part not passing, kernel FAIL (pixi run s16" in part.summary, part


def test_a_decode_time_faster_than_the_memory_is_too_fast_to_tell_and_gets_no_ratio():
    """MAX's decode once read 0.010 ms for 3.1 MB (310 GB/s on a 34 GB/s machine): the noise of two calls'
    difference, reported as a time and a ratio. A time past CREDIBLE x the bandwidth is no figure."""
    from checker.steps.step17.timing import CREDIBLE, credible

    mb = 3_000_000
    got = credible({"yours": mb / 30e9, "max": mb / 300e9, "torch": None}, {"yours": mb, "max": mb, "torch": mb}, 34e9)
    assert got == {"yours": mb / 30e9, "max": None, "torch": None}
    assert credible({"max": mb / (CREDIBLE * 34e9) * 1.01}, {"max": mb}, 34e9)["max"] is not None


@pytest.mark.parametrize("compute, words", [
    (lambda q, kc, vc, P: attend(q, kc, vc, P, lambda P, t: 0, lambda P, t: P + t + 1), "one key past itself"),
    (lambda q, kc, vc, P: attention(q, kc, kc, P), "the values are read from the key cache"),
    (lambda q, kc, vc, P: attend(q, kc, vc, P, lambda P, t: P, lambda P, t: P + t), "the P cached positions are "
     "skipped"),
    (lambda q, kc, vc, P: attend(q, kc, np.concatenate([vc[:, :, 1:], np.full_like(vc[:, :, :1], np.nan)], axis=2), P,
                                 lambda P, t: 0, lambda P, t: P + t), "the values are read one position later"),
])
def test_attention_with_its_inputs_exchanged_is_told_by_what_it_read(compute, words):
    """A kernel that computes attention from other inputs or bounds than GPT-2's, on every case, is told which."""
    part = step17_kernel.judge(step17_kernel.arrays(), _uncatalogued(compute))
    assert part.status == FAIL and words in part.details[0] and part.mistake is None, _said(part)


def test_a_cache_read_with_a_heads_stride_of_t_is_told_as_that_stride():
    """Head (b, h)'s keys read at ((b * H + h) * T + j) * D: what a cache [B, H, T, D] would hold."""
    def stride_t(q, kc, vc, P):
        B, H, T, D = q.shape
        at = ((np.arange(B * H)[:, None] * T + np.arange(P + T)[None, :])[..., None] * D + np.arange(D))
        read = [np.where(at < c.size, c.reshape(-1)[np.minimum(at, c.size - 1)], np.nan).reshape(B, H, P + T, D)
                for c in (kc, vc)]
        return attention(q, *read, P)
    part = step17_kernel.judge(step17_kernel.arrays(), _uncatalogued(stride_t))
    assert "as if a head held T positions, not N" in part.details[0], _said(part)


def test_a_scale_from_the_head_count_is_told_as_that_dimension():
    part = step17_kernel.judge(step17_kernel.arrays(), _uncatalogued(
        lambda q, kc, vc, P: attention(q, kc, vc, P, scale=1 / np.sqrt(q.shape[1]))))
    assert "1 / sqrt(H) on every case, so your scale is computed from H" in part.details[0], _said(part)


def test_weights_divided_by_the_first_tiles_sum_are_told_as_the_normalisation():
    """acc divided by the sum of its first 16 keys' exps only: each query its right output times a number of its
    own, and only queries that see more than 16 keys off."""
    def first_tile(q, kc, vc, P):
        S = P + q.shape[2]
        s = q.astype(np.float64) @ kc[:, :, :S].astype(np.float64).swapaxes(-1, -2) / 8
        s = np.where(np.arange(S)[None] > (P + np.arange(q.shape[2]))[:, None], -np.inf, s)
        w = np.exp(s - s.max(-1, keepdims=True))
        with np.errstate(divide="ignore", invalid="ignore"):
            return (w / w[..., :16].sum(-1, keepdims=True)) @ vc[:, :, :S].astype(np.float64)
    said = _said(step17_kernel.judge(step17_kernel.arrays(), _uncatalogued(first_tile)))
    assert "times a number of its own" in said and "The normalisation by the sum l" in said, said
    assert "right on every query that sees 16 keys or fewer" in said, said


@pytest.mark.parametrize("compute, words", [
    (lambda q, kc, vc, P: np.full(q.shape, np.nan), "NaN in every output, a query that sees a single key "
     "included"),
    (lambda q, kc, vc, P: np.where((np.arange(q.shape[2]) % 8 != 0)[:, None], 0.0, attention(q, kc, vc, P)),
     "queries t = 0, 8, 16, ... are right"),
    (lambda q, kc, vc, P: attend(q, kc, vc, P, lambda P, t: 0, lambda P, t: np.minimum(P + t, P + q.shape[2] - 2)),
     "the keys end one short"),
    (lambda q, kc, vc, P: attention(q, kc, vc, P, scale=1 / 8 if P != 200 else 1e-6),
     "off only where every score is far below 0"),
])
def test_which_queries_are_off_is_told_by_what_they_share(compute, words):
    """NaN on every query from the first key on, queries in bands of 8 read at their band's start, the last
    query of each call without its own key, the weights flattened where the scores are far below 0 alone:
    each told by the rows that are off."""
    said = _said(step17_kernel.judge(step17_kernel.arrays(), _uncatalogued(compute)))
    assert words in said, said


def test_a_store_of_k_into_the_value_cache_is_told_by_what_it_wrote():
    inputs = step17_kernel.arrays()
    computed = {}
    for name, (q, k, v, kc, vc, past) in inputs.items():
        P = int(past[0])
        kc, vc = written(k, k, kc, vc, P)  # the new keys into both caches
        computed[name] = (attention(q, kc, vc, P), kc, vc)
    said = _said(step17_kernel.judge(inputs, _results(computed)))
    assert "v_cache holds the call's k at the new positions" in said and "reads k where v belongs" in said, said


def test_queries_off_from_an_index_on_whatever_p_are_told_as_a_later_band():
    """Queries at index 8 and later in their call see the keys of P + (t - 8) + 1, as a bound counted from a band's
    start: the cases with such queries are off from query 8 on, whatever P, and that is said, not "after the first
    8 keys" (a case with P = 9 has its queries of 10-16 keys right)."""
    def band_relative(q, kc, vc, P):
        return attend(q, kc, vc, P, lambda P, t: 0, lambda P, t: P + np.where(t >= 8, t - 8, t))

    part = step17_kernel.judge(step17_kernel.arrays(), _uncatalogued(band_relative))
    said = _said(part)
    assert part.status == FAIL and "right on each call's first 8 queries, whatever P" in said, said
    assert "after the first 8 keys" not in said, said


def test_an_output_stored_at_another_sequences_place_is_told_as_whose_it_holds():
    """Each query's output stored at ((head % H) * T + t) * D: with a batch of 2, sequence 0 holds sequence 1's
    outputs and sequence 1's stay 0; said as that, not as bounds on the keys the off rows see."""
    inputs = step17_kernel.arrays()
    computed = {}
    for name, (q, k, v, kc, vc, past) in inputs.items():
        out, kc, vc = expected(q, k, v, kc, vc, past)
        if len(out) > 1:
            out = np.stack([out[1], np.zeros_like(out[1])])
        computed[name] = (out, kc, vc)
    said = _said(step17_kernel.judge(inputs, _results(computed)))
    assert "off queries hold another query's right output: sequence 0 holds sequence 1's (the same head and query)" \
        in said, said
    assert "hold no query's right output, every value 0: never written" in said and "keys or fewer" not in said, said


def test_the_tile_a_catalogued_mistake_is_cut_by_is_said():
    """The keys after the last whole vector of 16 left out is the catalogue's last tile, cut in tiles of 16: the
    tile is said, so a kernel whose own tile is 64 looks at its loop that steps by 16."""
    inputs = step17_kernel.arrays()
    part = step17_kernel.judge(inputs, _results({name: output(LAST_TILE, arrays, 16, 2)
                                                 for name, arrays in inputs.items()}))
    said = _said(part)
    assert part.mistake is LAST_TILE and "a loop over keys that steps by 16 (a tile, or a vector" in said, said
