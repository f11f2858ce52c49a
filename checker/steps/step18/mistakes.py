"""Step 18's catalogue: paged attention kernels a learner may write instead of the right one, each with what it
computes from a case's arrays (its output, and the pool it leaves) and the edit that makes it in the
solution's Mojo. A mistake is named when its output and pool equal the learner's on every case.

    compute(q, k, v, blocks, cache_lengths, lookup, offsets, layer) -> (output [T, H, D], blocks after)
"""

from __future__ import annotations

import os

import numpy as np

from checker.reporting.compare import Edit, Mistake
from checker.steps.step18.reference import attend, causal, positions, stored

KERNEL = "paged_flash.mojo"


def _with(table=None, lengths=None):
    """The right kernel handed another page table or other cache lengths, for its stores and its reads alike."""
    def compute(q, k, v, blocks, cache_lengths, lookup, offsets, layer):
        t = lookup if table is None else table(lookup)
        c = cache_lengths if lengths is None else lengths(cache_lengths)
        after = stored(k, v, blocks, c, t, offsets, int(layer[0]))
        return causal(q, after, c, t, offsets, int(layer[0])), after
    return compute


def _at_chunk_slots(q, k, v, blocks, cache_lengths, lookup, offsets, layer):
    """Each new row stored in the right page, but at the slot of its index in the chunk, i % PAGE."""
    after = blocks.copy()
    request, position = positions(offsets, cache_lengths)
    P, lay = blocks.shape[3], int(layer[0])
    index = np.arange(len(request)) - offsets[request].astype(np.int64)
    page = lookup[request, position // P].astype(np.int64)
    after[page, 0, lay, index % P] = k
    after[page, 1, lay, index % P] = v
    return causal(q, after, cache_lengths, lookup, offsets, lay), after


def _whole_chunk(q, k, v, blocks, cache_lengths, lookup, offsets, layer):
    """Every row of a chunk sees the whole chunk: keys 0 .. the request's last position."""
    lay = int(layer[0])
    after = stored(k, v, blocks, cache_lengths, lookup, offsets, lay)
    return attend(q, after, cache_lengths, lookup, offsets, lambda p, end: 0, lambda p, end: end, layer=lay), after


def splits_for(batch: int, heads: int, single: bool, threads: int | None = None) -> int:
    """How a kernel that splits a decode head's keys across idle threads cuts them: ceil(threads / (B x H)) when
    every request has one row and the heads alone leave threads idle, else 1 (the solution's rule)."""
    threads = threads or os.cpu_count() or 1
    return -(-threads // (batch * heads)) if single and batch * heads < threads else 1


def _split_floor(q, k, v, blocks, cache_lengths, lookup, offsets, layer):
    """A decode head's S keys split into parts of S // splits: the last S % splits keys never read (none at all
    when S < splits)."""
    lay = int(layer[0])
    after = stored(k, v, blocks, cache_lengths, lookup, offsets, lay)
    lengths = np.diff(offsets.astype(np.int64))
    splits = splits_for(len(lengths), q.shape[1], bool((lengths == 1).all()))
    return attend(q, after, cache_lengths, lookup, offsets, lambda p, end: 0,
                  lambda p, end: splits * ((p + 1) // splits), layer=lay), after


OTHER_REQUEST_PAGES = Mistake(
    "other-request-pages", "every request's positions were looked up in request 0's row of the page table: the "
    "rows of the other requests read (and store into) request 0's pages",
    "lookup_table is [B, max_pages]: request b's i-th page is lookup_table[b, i], its row b.",
    _with(table=lambda lookup: np.repeat(lookup[:1], len(lookup), 0)),
    Edit("var page = Int(lk[unsafe_offset=b * MP + pos // PAGE])", "var page = Int(lk[unsafe_offset=pos // PAGE])",
         file=KERNEL))
PAGE_FROM_POSITION = Mistake(
    "page-from-position", "the page of position pos was taken as pos / PAGE itself, not looked up in the page "
    "table: every request reads and writes the pool's first pages",
    "A request's pages are scattered through the pool: position pos lives in page lookup_table[b, pos / PAGE].",
    _with(table=lambda lookup: np.broadcast_to(np.arange(lookup.shape[1], dtype=lookup.dtype), lookup.shape)),
    Edit("var page = Int(lk[unsafe_offset=b * MP + pos // PAGE])", "var page = pos // PAGE", file=KERNEL))
CACHE_LENGTH_IGNORED = Mistake(
    "cache-length-ignored", "every request's new rows were placed from position 0, as if nothing were cached: "
    "cache_lengths was not added",
    "Row r of request b sits at position cache_lengths[b] + (r - input_row_offsets[b]): after what it already has.",
    _with(lengths=np.zeros_like),
    Edit(("var pos = Int(cl[unsafe_offset=b]) + r - Int(off[unsafe_offset=b])",
          "var cached = Int(cl[unsafe_offset=b]) - Int(off[unsafe_offset=b])"),
         ("var pos = r - Int(off[unsafe_offset=b])", "var cached = -Int(off[unsafe_offset=b])"), file=KERNEL))
WRITTEN_AT_PAGE_START = Mistake(
    "written-at-page-start", "the new keys and values were stored from the start of their page (slot i % PAGE for "
    "the chunk's i-th row), not at their position's slot: over the cached positions sharing that page",
    "Position pos lives in slot pos % PAGE of its page; a chunk starts where the cache ends, mid-page.",
    _at_chunk_slots,
    Edit("var kto, vto = slot(b, pos, 0), slot(b, pos, 1)",
         "var at = ((r - Int(off[unsafe_offset=b])) % PAGE - pos % PAGE) * head_size\n"
         "            var kto, vto = slot(b, pos, 0) + at, slot(b, pos, 1) + at", file=KERNEL))
NO_CAUSAL_IN_CHUNK = Mistake(
    "no-causal-in-chunk", "every row of a chunk attended to the whole chunk, its later rows too: the causal bound "
    "within a chunk is missing",
    "The row at position pos sees keys 0 .. pos, not the chunk's last position.",
    _whole_chunk,
    Edit(("var S = cached + r + 1  # the keys row r sees: 0 .. its own position",
          "seen[i] = Int32(cached + first_row + min(i, n - 1) + 1)"),
         ("var S = cached + Int(off[unsafe_offset=b + 1])", "seen[i] = Int32(cached + Int(off[unsafe_offset=b + 1]))"),
         file=KERNEL))
SPLIT_FLOOR = Mistake(
    "split-floor", "a decode head's S keys were split into parts of S / splits keys, rounded down: the last "
    "S % splits keys are never read, and a request with fewer keys than splits reads none",
    "Round a split's size up, ceil(S / splits), and let the last split end at S.",
    _split_floor,
    Edit("var per_split = (S + splits - 1) // splits", "var per_split = S // splits", file=KERNEL))

CATALOGUE = [OTHER_REQUEST_PAGES, PAGE_FROM_POSITION, CACHE_LENGTH_IGNORED, WRITTEN_AT_PAGE_START,
             NO_CAUSAL_IN_CHUNK, SPLIT_FLOOR]
