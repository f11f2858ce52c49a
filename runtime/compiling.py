"""A GPT-2 compiled whole into one MAX graph, as `pixi run gpt2` runs it.

    load_gpt2(GPT2LMHeadModel, load_hf_weights, checkpoint)   the model, its weights loaded by the loader given
    compile_gpt2(model)                     ids [batch, seq] -> logits [batch, seq, V]
    compile_with_cache(cached, config)      ids [batch, seq], 2L caches [batch, H, past, D]
                                            -> logits [batch, V], 2L caches [batch, H, past + seq, D]
    compile_decode(module, config)          the same for one position: ids [batch, 1]
    compile_flash(module, config)           ids [batch, seq], past [1] int64, 2L caches [batch, H, N, D] written
                                            in place (N = n_positions; float32 or float16) -> logits [batch, V]
    prefill_then_decode(prefill, decode)    one callable: the prompt through one graph, each step the other

Every size a model is asked at is a symbolic dimension (BATCH, SEQ, PAST), so one graph serves every
prompt; MAX caches graphs on disk, so an unchanged one loads in seconds. A graph is compiled by one
process at a time (`OneAtATime`): a second process asking for the same graph meanwhile (a check and a
`watch`, the test suite's two workers) waits for the first, then loads it from that cache, instead of
compiling it again beside it at half the speed.
MAX is imported inside the functions: importing it takes seconds, and a command that fails early need not.
"""

from __future__ import annotations

import fcntl
import hashlib
import sys
import threading
import time
from functools import cache

import numpy as np

from runtime.checkpoints import Checkpoint
from runtime.loading import stored_tensors
from runtime.paths import CACHE
from runtime.threads import yield_to_host

# Symbolic dimension names, by the meaning of an axis.
BATCH, HEADS, SEQ, PAST = "batch", "heads", "seq", "past"
TOKENS = (BATCH, SEQ, None)  # [B, T, C]: the width stays fixed


def _dims(array: np.ndarray, names: tuple) -> list:
    """The input type's shape: a name where the axis is symbolic, the size where it is fixed."""
    return [name if name else size for name, size in zip(names, array.shape)]


class Compiled:
    """A compiled graph, called as MAX's compiled callable is, at a fraction of its cost per call. MAX checks
    every argument against the graph's inputs on every call (~1 ms for a decode step's 26: ids, past and
    the caches, an eighth of the step); here a call whose arguments have the dtypes, shapes and devices of
    an earlier call goes to the engine directly. A call with anything new, or an argument not yet computed,
    takes MAX's checked path: a wrong argument still gets MAX's message."""

    def __init__(self, compiled):
        self.compiled = compiled
        self._seen: set[tuple] = set()  # each argument's (dtype, shape, device) in the calls checked so far

    def __call__(self, *args):
        from max import tree
        from max.experimental.tensor import Tensor

        try:
            buffers = [arg.driver_tensor for arg in args]
        except (AttributeError, TypeError):  # not a Tensor, or not yet computed
            return self.compiled(*args)
        signature = tuple((b.dtype, tuple(b.shape), b.device) for b in buffers)
        if signature not in self._seen:
            result = self.compiled(*args)
            self._seen.add(signature)
            return result
        outputs = self.compiled.execute_raw(*buffers)
        return tree.unflatten(self.compiled.out_tree, [Tensor(storage=b) for b in outputs])

    def __getattr__(self, name):
        return getattr(self.compiled, name)


COMPILING = CACHE / "compiling"  # a lock file per graph being compiled, named by the graph's text


class OneAtATime:
    """MAX's session, but a graph is compiled holding a lock named by a hash of its text (the graph refers to
    its weights by name, so the same code on the same shapes is the same text), and a process that finds
    the lock held says so and waits: then MAX finds the graph in its cache."""

    def __init__(self, session):
        self.session = session

    def compile_reusing_mefs(self, graph, **kwargs):
        name = hashlib.sha256(str(graph).encode()).hexdigest()[:16]
        try:
            COMPILING.mkdir(parents=True, exist_ok=True)
            lock = open(COMPILING / f"{name}.lock", "w")
        except OSError:  # a read-only clone: compiled unlocked
            return self.session.compile_reusing_mefs(graph, **kwargs)
        with lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                _wait(lock)
            return self.session.compile_reusing_mefs(graph, **kwargs)  # the lock is held until the file closes

    def __getattr__(self, name):
        return getattr(self.session, name)


def _wait(lock) -> None:
    notice = threading.Timer(3.0, lambda: print(
        "(another process is compiling this same graph: waiting for it, then loading it from MAX's cache)",
        file=sys.stderr, flush=True))
    notice.start()
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the other's file closes, or its process ends
    finally:
        notice.cancel()


@cache
def session() -> OneAtATime:
    """The session the course's graphs compile in (`compile_module`'s, and the paged graphs' of steps 14 and 18
    the checker and the bench build): one a process, on the CPU."""
    from max.driver import CPU
    from max.engine import InferenceSession

    made = OneAtATime(InferenceSession(devices=[CPU()]))
    yield_to_host()  # the decode loop's Python runs at once beside MAX's spinning threads (runtime/threads.py)
    return made


def compile_module(module, inputs: list[tuple[np.ndarray, tuple]]) -> Compiled:
    """`module.compile` for inputs given as (example array, axis names); None in names keeps a size."""
    from max.driver import CPU
    from max.dtype import DType
    from max.graph import TensorType

    types = [TensorType(DType.from_numpy(a.dtype), _dims(a, names), device=CPU()) for a, names in inputs]
    return Compiled(module.compile(*types, session=session()))


def run_compiled(compiled, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """A compiled graph on numpy inputs; its outputs as float64 numpy."""
    from max.experimental.tensor import Tensor

    out = compiled(*(Tensor.from_dlpack(np.ascontiguousarray(a)) for a in arrays))
    return [np.from_dlpack(o).astype(np.float64) for o in (out if isinstance(out, (tuple, list)) else [out])]


def load_gpt2(model_cls, load_hf_weights, checkpoint: Checkpoint):
    """`model_cls(config)` with the checkpoint loaded by `load_hf_weights`."""
    from max.experimental import functional as F

    with F.lazy():  # no random initialisation is computed: the checkpoint replaces it
        model = model_cls(checkpoint.learner_config())
    load_hf_weights(model, stored_tensors(checkpoint))
    return model


def compile_gpt2(model, *, quiet: bool = False):
    """A loaded GPT2LMHeadModel compiled for int64 ids [batch, seq] (both symbolic)."""
    started = time.perf_counter()
    if not quiet:
        print("Compiling the model into one MAX graph (~2 s when cached; 1-3 min after a change)...",
              file=sys.stderr, flush=True)
    compiled = compile_module(model, [(np.zeros((1, 1), np.int64), (BATCH, SEQ))])
    if not quiet:
        print(f"...compiled in {time.perf_counter() - started:.1f} s.", file=sys.stderr, flush=True)
    return compiled


def cache_input(config) -> tuple[np.ndarray, tuple]:
    """One cache input of a model with a KV cache: float32 [batch, H, past, D], batch and past symbolic."""
    return np.zeros((1, config.n_head, 0, config.n_embd // config.n_head), np.float32), (BATCH, None, PAST, None)


def compile_with_cache(module, config, *, seq: str | None = SEQ):
    """`module` (a GPT2WithCache around a loaded GPT2LMHeadModel) compiled: int64 ids [batch, seq] and 2L
    float32 caches [batch, H, past, D], all three symbolic (`seq=None`: one position, a decode-only graph)."""
    ids = (np.zeros((1, 1), np.int64), (BATCH, seq))
    return compile_module(module, [ids] + [cache_input(config)] * (2 * config.n_layer))


def compile_decode(module, config):
    """`module` (a model with a KV cache whose products go through a kernel) compiled for decode: ids
    [batch, 1], 2L caches [batch, H, past, D]. The prompt runs through another graph, so a matrix-vector
    kernel never reads the weights once per prompt row."""
    return compile_with_cache(module, config, seq=None)


def prefill_then_decode(prefill, decode):
    """One callable for a generate loop: the prompt (more than one position) through `prefill`, then
    each one-position step through `decode`."""
    def run(input_ids, *cache):
        return (decode if input_ids.shape[-1] == 1 else prefill)(input_ids, *cache)
    return run


def compile_flash(module, config, *, seq: int | None = None, cache_dtype=np.float32):
    """`module` (step 17's GPT2Flash around a loaded GPT2LMHeadModel) compiled: int64 ids [batch, seq] (both
    symbolic; `seq` fixes the positions a call takes, 1 for a decode-only graph), past [1] int64 and 2L
    caches [batch, H, n_positions, D] of `cache_dtype` (numpy's or MAX's: float32, or float16 when the
    learner's empty_flash_cache makes those), which it writes in place."""
    ids = (np.zeros((1, seq or 1), np.int64), (BATCH, None if seq else SEQ))
    past = (np.zeros(1, np.int64), (None,))
    dtype = cache_dtype.to_numpy() if hasattr(cache_dtype, "to_numpy") else cache_dtype
    cache = (np.zeros((1, config.n_head, config.n_positions, config.n_embd // config.n_head), dtype),
             (BATCH, None, None, None))
    return compile_module(module, [ids, past] + [cache] * (2 * config.n_layer))

