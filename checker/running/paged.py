"""MAX's paged-cache kernels op by op: a stand-in for a first, uncompiled run of a learner's step 14.

MAX runs `store_k_cache_ragged`, `store_v_cache_ragged` and `flash_attention_ragged` only inside a
compiled graph (they write the cache in place, which its op-by-op interpreter refuses), and compiling
a learner's changed paged model takes about a minute on 2 cores. Inside `standing_in(modules)` those
three kernels are this module's numpy versions of the same contracts, so the learner's GPT2Paged runs op
by op (its other ops already compiled by earlier steps) and a wrong one is answered in seconds. Only a
call the kernels' documented contract covers is taken: anything else (another mask, a sliding window, a
layer index that is not a uint32 scalar, a kernel this module does not stand in for) raises
NotStoodIn, and the check compiles instead.

    PagedCache   one batch's view of the cache: the requests at its rows and their cache_lengths [B]
    store        x [T, H, D] -> the request's positions cache_lengths[b] .. + its new rows, one layer
    attention    q [T, H, D] -> [T, H, D]: each row over its own request's positions, causal or all
"""

from __future__ import annotations

import contextlib
from types import ModuleType

import numpy as np

# MAX is imported inside the functions that use it: importing it takes seconds.

KINDS = ("key", "value")


class NotStoodIn(Exception):
    """A call outside what the stand-in covers: the check compiles the model instead."""


class PagedCache:
    """The paged cache of a sequence of batches, its pages a numpy array per (layer, key or value,
    request) of `max_length` positions (zeros until stored). `batch(requests, cached)` is what one
    batch's forward is handed as its kv_collection."""

    def __init__(self, layers: int, heads: int, head_dim: int, max_length: int = 64):
        self.layers, self.heads, self.head_dim, self.max_length = layers, heads, head_dim, max_length
        self.pages: dict[tuple[int, str, str], np.ndarray] = {}
        self.requests: list[str] = []

    def batch(self, requests: list[str], cached: list[int]) -> PagedCache:
        """This cache for the batch whose rows hold `requests` (in order), each with `cached` positions."""
        from max.experimental.tensor import Tensor

        self.requests = list(requests)
        self.cache_lengths = Tensor.from_dlpack(np.array(cached, dtype=np.uint32))  # [B], as MAX's
        return self

    def rows(self, name: str, layer: int, kind: str) -> np.ndarray:
        """[max_length, H, D]: one request's positions for one layer, written in place."""
        key = (layer, kind, name)
        if key not in self.pages:
            self.pages[key] = np.zeros((self.max_length, self.heads, self.head_dim), dtype=np.float64)
        return self.pages[key]


def _array(x, what: str, *, rank: int | None = None) -> np.ndarray:
    from max.experimental.tensor import Tensor

    if not isinstance(x, Tensor):
        raise NotStoodIn(f"{what} is a {type(x).__name__}, not a Tensor")
    a = np.from_dlpack(x)
    if rank is not None and a.ndim != rank:
        raise NotStoodIn(f"{what} has rank {a.ndim}, not {rank}")
    return a


def _layer(layer_idx, cache: PagedCache) -> int:
    a = _array(layer_idx, "layer_idx", rank=0)
    if a.dtype != np.uint32 or not 0 <= int(a) < cache.layers:
        raise NotStoodIn(f"layer_idx {a} ({a.dtype})")
    return int(a)


def _batch(kv_collection, input_row_offsets, x, heads: int | None = None,
           head_dim: int | None = None) -> tuple[PagedCache, np.ndarray, np.ndarray]:
    """The cache, the offsets [B+1] and the rows [T, H, D] of one kernel call, as its contract has them."""
    if not isinstance(kv_collection, PagedCache):
        raise NotStoodIn(f"kv_collection is a {type(kv_collection).__name__}")
    cache = kv_collection
    offsets = _array(input_row_offsets, "input_row_offsets", rank=1)
    rows = _array(x, "the input", rank=3)
    if offsets.dtype != np.uint32 or len(offsets) != len(cache.requests) + 1 or offsets[-1] != len(rows):
        raise NotStoodIn(f"input_row_offsets {offsets} for {len(rows)} rows")
    if rows.shape[1:] != (heads or cache.heads, head_dim or cache.head_dim) or rows.dtype != np.float32:
        raise NotStoodIn(f"the input is {rows.dtype} {list(rows.shape)}")
    return cache, offsets.astype(np.int64), rows.astype(np.float64)


def _store(kind: str):
    def store(kv_collection, x, input_row_offsets, layer_idx) -> None:
        """The new rows of each request into its cache, after its cached positions."""
        cache, offsets, rows = _batch(kv_collection, input_row_offsets, x)
        layer, cached = _layer(layer_idx, cache), np.from_dlpack(cache.cache_lengths).astype(np.int64)
        for b, name in enumerate(cache.requests):
            start, end = offsets[b], offsets[b + 1]
            cache.rows(name, layer, kind)[cached[b]:cached[b] + end - start] = rows[start:end]

    return store


def attention(kv_params, input, input_row_offsets, kv_collection, layer_idx, mask_variant, scale,
              local_window_size=-1, sink_weights=None, rel_logits=None, output_dtype=None):
    """flash_attention_ragged's contract: each new row of request b (position cached[b] + i) attends
    over that request's cached and stored positions, 0 .. its own (CAUSAL_MASK) or all of them
    (NULL_MASK), softmax(q . k * scale) @ v, from the cache as it is after this layer's stores."""
    from max.dtype import DType
    from max.experimental.tensor import Tensor
    from max.nn.attention import MHAMaskVariant

    if local_window_size != -1 or sink_weights is not None or rel_logits is not None or \
            output_dtype not in (None, DType.float32):
        raise NotStoodIn("a window, sinks, relative logits or another output dtype")
    if mask_variant not in (MHAMaskVariant.CAUSAL_MASK, MHAMaskVariant.NULL_MASK):
        raise NotStoodIn(f"mask {mask_variant}")
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise NotStoodIn(f"scale {scale!r}")
    cache, offsets, q = _batch(kv_collection, input_row_offsets, input, kv_params.n_kv_heads, kv_params.head_dim)
    layer, cached = _layer(layer_idx, cache), np.from_dlpack(cache.cache_lengths).astype(np.int64)
    out = np.zeros_like(q)
    for b, name in enumerate(cache.requests):
        start, end = offsets[b], offsets[b + 1]
        total = cached[b] + end - start
        if total > cache.max_length:
            raise NotStoodIn(f"{total} positions")
        keys, values = (cache.rows(name, layer, kind)[:total] for kind in KINDS)  # [P, H, D]
        scores = np.einsum("thd,phd->htp", q[start:end], keys) * scale  # [H, t, P]
        if mask_variant == MHAMaskVariant.CAUSAL_MASK:
            positions = cached[b] + np.arange(end - start)  # each new row's own position
            scores = np.where(np.arange(total)[None, None, :] <= positions[None, :, None], scores, -np.inf)
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        out[start:end] = np.einsum("htp,phd->thd", weights, values)
    return Tensor.from_dlpack(out.astype(np.float32)).to(input.device)


@contextlib.contextmanager
def standing_in(modules: list[ModuleType]):
    """While inside, MAX's three paged-cache kernels are this module's: in max.nn.kernels, through
    F.functional, and in `modules`' globals (the learner's step files, which bound them at import,
    directly or wrapped by F.functional). Everything is put back on leaving."""
    from max.experimental import functional as F
    from max.nn import kernels

    ours = {kernels.store_k_cache_ragged: _store("key"), kernels.store_v_cache_ragged: _store("value"),
            kernels.flash_attention_ragged: attention}
    functional = F.functional

    def theirs(value):
        return getattr(value, "graph_op", value)

    def stood_in(value):
        """What a global bound to one of the kernels (or to F.functional) becomes while inside."""
        try:
            if theirs(value) in ours:
                return ours[theirs(value)]
        except TypeError:  # unhashable
            return None
        return wrap if value is functional else None

    def wrap(op, *args, **kwargs):
        return ours.get(theirs(op)) or (op if op in ours.values() else functional(op, *args, **kwargs))

    saved = [(kernels, name, getattr(kernels, name)) for name in
             ("store_k_cache_ragged", "store_v_cache_ragged", "flash_attention_ragged")]
    saved.append((F, "functional", functional))
    for module in modules:
        saved += [(module, name, value) for name, value in vars(module).items() if stood_in(value) is not None]
    try:
        for owner, name, value in saved:
            setattr(owner, name, stood_in(value))
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)
