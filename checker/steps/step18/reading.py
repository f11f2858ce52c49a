"""Step 18's paged attention read from what it computed and the pool it left, when no catalogued mistake explains
it (checker.diagnosis.reading does the reading):

    pool_problems(inputs, got, want)   what the stores did wrong, read from the pool: the wrong layer, keys and
                                       values exchanged, heads laid out before slots, rows stored in another
                                       position's slot (which, found by their keys), a page no new row of the
                                       request belongs to (a shared prefix's, another request's, a spare one),
                                       the cached positions written over, new positions left unwritten
    readings(inputs, results, wants)   the lines for a failing output: the reference with its inputs exchanged
                                       when one computes every case, else which rows are off, read by their
                                       features, where NaN appears, and the exchange that computes the off
                                       rows (one way through the kernel taken by some rows only)

A row is one head of one new row of one case: request b's row at position p, which sees positions 0 .. p of b's
pages.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from checker.diagnosis.reading import (
    Above,
    Rows,
    Rule,
    Variant,
    factors,
    first_variant,
    read,
    relocated,
    variant_of_rows,
)
from checker.reporting.compare import differs, ranges
from checker.steps.step18.reference import KERNEL, attend, kernel_cases, positions, stored, stored_at

AXES = ("row", "head", "")
COORDS = (("request", "request"), ("index", "new row"), ("head", "head"))  # a row's place, as relocated says it


def _features(case, arrays) -> dict[str, np.ndarray]:
    """Each (row, head)'s features, in the output's order [T, H]."""
    cache_lengths, offsets = arrays[4], arrays[6]
    request, position = positions(offsets, cache_lengths)
    lengths = np.diff(offsets.astype(np.int64))[request]
    index = np.arange(len(request)) - offsets[request].astype(np.int64)
    per_row = {"request": request, "position": position, "index": index, "rows": lengths, "decode": lengths == 1,
               "last": index == lengths - 1, "cached": cache_lengths[request].astype(np.int64),
               "later_pages": position >= case.page}
    features = {key: np.repeat(value, case.heads) for key, value in per_row.items()}
    alone = len(cache_lengths) * case.heads == 1 and len(request) == 1  # one head decoding: its keys split
    return {**features, "head": np.tile(np.arange(case.heads), len(request)), "page": case.page,
            "batch": len(cache_lengths), "heads": case.heads, "alone": alone}


SPLIT = ("where a kernel splits a head's keys across the threads the batch leaves idle: each split's range of keys "
         "(every key in exactly one) and the combine (each split's l and acc scaled by exp(m_split - m) before they "
         "are added)")

OFF = [
    *(Rule(lambda f: f["alone"], f"off {said} the cases of one head decoding alone, {SPLIT}", within=within)
      for within, said in ((False, "exactly on"), (True, "only among"))),
    Rule(lambda f: f["decode"], "off exactly on the decode rows (requests with one new row); every row of a chunk "
         "is right: the code that runs only when every request has one row (the split of a head's keys across "
         "threads and its combine), or a decode row's position or request"),
    Rule(lambda f: ~f["decode"], "off exactly on the rows of chunks (requests with more than one new row), every "
         "decode row right: a chunk's rows after its first (their positions, the keys of the same chunk they see, "
         "the causal bound within it)"),
    *(Rule(lambda f, k=k: f["rows"] < k, f"off {said} the requests of fewer than {k} new rows (decode rows "
           f"included), every request of {k} or more right: what your kernel does for a request of fewer than "
           f"{k} rows (a way of its own for few rows, a row at a time; or a band's rows when a band holds up to "
           f"{k}): its scale, its keys and values, its causal bound", within=within)
      for within, said in ((False, "exactly on"), (True, "only among")) for k in (4, 8, 16)),
    *(Rule(lambda f, k=k: f["rows"] >= k, f"off {said} the chunks of {k} new rows or more, every smaller "
           f"request and every decode right: the way your kernel takes for a band of a chunk's rows: the keys each "
           "row sees (its causal bound: its own position included), the rescale of each row's l and acc",
           within=within)
      for within, said in ((False, "exactly on"), (True, "only among")) for k in (4, 8, 16)),
    *(Rule(lambda f, odd=odd: (f["index"] % 2 == odd) & ~f["decode"], f"{said} the rows at an {word} index in their "
           f"chunk ({which} of each pair of a chunk's rows, counted from its first), the others right: what your "
           "kernel does for one row of two it handles together (its own factor, weights, keys and sums)",
           within=within)
      for within, said in ((False, "off exactly on"), (True, "off only among"))
      for odd, word, which in ((1, "odd", "the second"), (0, "even", "the first"))),
    Rule(lambda f: f["index"] > 0, "off exactly on the rows after the first of each chunk: what differs between a "
         "chunk's rows, their position cache_lengths[b] + (r - input_row_offsets[b]) and the bound of the keys "
         "each sees (its own position)"),
    Rule(lambda f: f["request"] > 0, "off exactly on every request after the batch's first, request 0 right: a "
         "request's own row of the page table (lookup_table[b, ...]), its own cache length, or its rows' offsets"),
    Rule(lambda f: f["cached"] > 0, "off exactly on the requests that have cached positions, those starting at 0 "
         "right: the positions a request already has (cache_lengths[b]) in its rows' positions or its keys"),
    Rule(lambda f: f["later_pages"], "off exactly on the rows at positions past their request's first page: the "
         "page of position p, lookup_table[b, p / PAGE], and the slot within it, p % PAGE"),
    Rule(lambda f: f["later_pages"], "off only among the rows whose keys fill more than one page (a position past "
         "their request's first), every row whose keys fit in one page right: where the loop over keys crosses from "
         "one page to the next (a tile of keys cut at its page's end, the next page looked up in lookup_table)",
         within=True),
    Rule(lambda f: f["last"] & ~f["decode"], "off exactly on each chunk's last row: the end of a request's rows "
         "(input_row_offsets[b + 1], one past its last)"),
    Rule(lambda f: f["batch"] > 1, "off exactly on the batches of more than one request, every single request "
         "right: how a row finds its request (input_row_offsets) and that request's page-table row"),
    Above("position", "off exactly on the rows at positions above {k}, every row at or below {k} right",
          "right on every row at a position up to {k}; {off} of the {above} rows above {k} off"),
    Rule(lambda f: f["head"] > 0, "off exactly on every head but the first, head 0 right: a head's place in a "
         "position's H x D values, (slot x H + h) x D, in q, k, v and the output as (r x H + h) x D"),
    Above("heads", "off exactly on the cases of more than {k} heads: a head's place in a position's H x D values, "
          "(slot x H + h) x D"),
]


def judged(wants: dict) -> list:
    """The kernel cases `wants` holds (every one, or those a crashing kernel ran), in kernel_cases' order."""
    return [case for case in kernel_cases() if case.name in wants]


def rows_of(inputs: dict, results: dict, wants: dict) -> Rows:
    """Every case's (row, head) pairs, the learner's first run against the reference: D values each."""
    cases = [(case.name, results[case.name][0].reshape(-1, results[case.name][0].shape[-1]),
              wants[case.name][0].reshape(-1, wants[case.name][0].shape[-1]), _features(case, inputs[case.name]))
             for case in judged(wants)]
    return Rows.of(cases, KERNEL)


def variants(inputs: dict) -> list[Variant]:
    """The reference with its inputs exchanged, each as the kernel would then compute it (stores included); each
    case computed once."""
    def v(says, **changed):
        @cache
        def compute(name):
            q, k, v_, blocks, cl, lookup, offsets, layer = inputs[name]
            args = {"q": q, "k": k, "v": v_, "cl": cl, "lookup": lookup, "layer": int(layer[0])}
            args.update({key: f(args) for key, f in changed.items()})
            after = stored(args["k"], args["v"], blocks, args["cl"], args["lookup"], offsets, args["layer"])
            read_layer = args.get("read_layer", args["layer"])
            lo, hi = args.get("bound", (lambda p, end: 0, lambda p, end: p + 1))
            return attend(args["q"], after, args["cl"], args["lookup"], offsets, lo, hi, layer=read_layer,
                          scale=args.get("scale"), read=args.get("read"), counted=args.get("counted"))
        return Variant(says, compute)

    def head_0(a):  # every head's numbers those of head 0
        return np.repeat(a[:, :1], a.shape[1], axis=1)

    return [
        v("the new rows' keys were stored as values and their values as keys", k=lambda a: a["v"], v=lambda a: a["k"]),
        v("k was stored for the values too", v=lambda a: a["k"]),
        v("layer 0's keys and values were read, not the layer asked for (the stores right)", read_layer=lambda a: 0),
        v("q was stored as the keys", k=lambda a: a["q"]),
        v("each row sees positions 0 .. p - 1, not its own: the bound one short",
          bound=lambda a: (lambda p, end: 0, lambda p, end: p)),
        v("each row sees positions 0 .. p + 1: the bound one past its own",
          bound=lambda a: (lambda p, end: 0, lambda p, end: p + 2)),
        v("the sum l counts the key one past the row's own, the values it weights do not: the causal bound applied "
          "to l and to acc apart, l's one key long", counted=lambda a: lambda p, end: p + 2),
        v("the scores were not scaled: q . k, not q . k / sqrt(D)", scale=lambda a: 1.0),
        v("the scores were scaled by 1 / D, not 1 / sqrt(D)", scale=lambda a: 1 / 64),
        v("the scores were scaled by 1 / sqrt(H x D), the model's width, not the head's D",
          scale=lambda a: 1 / np.sqrt(a["q"].shape[1] * 64)),
        v("the keys were read for the values too (the pool's keys half, blocks[page, 0], weighted; the stores right)",
          read=lambda a: lambda keys, values: (keys, keys)),
        v("the values were read for the keys too (scores against blocks[page, 1]; the stores right)",
          read=lambda a: lambda keys, values: (values, values)),
        v("every head's scores were taken against head 0's keys (a key's head offset, h x D, left out)",
          read=lambda a: lambda keys, values: (head_0(keys), values)),
        v("every head weighted head 0's values (a value's head offset, h x D, left out)",
          read=lambda a: lambda keys, values: (keys, head_0(values))),
    ]


# Where a kernel may store row r's key and value instead of its position p = cache_lengths[b] + i (i = r's index
# in its request): (what it did, the position it used, from p, r and the cache length)
STORES = [
    ("each row's position were cache_lengths[b] + r, r its index in the whole batch: input_row_offsets[b] not "
     "subtracted", lambda p, r, c: c + r),
    ("each row's position were one past its own (cache_lengths[b] + i + 1)", lambda p, r, c: p + 1),
    ("each row's position were one before its own (cache_lengths[b] + i - 1): over the last cached position",
     lambda p, r, c: p - 1),
]


def pool_problems(inputs: list[np.ndarray], got: np.ndarray, want: np.ndarray) -> list[str]:
    """What is wrong with the pool the kernel left on one case (its first run), read by where it differs: [] when
    it equals `want`."""
    if np.array_equal(got, want, equal_nan=True):
        return []
    q, k, v, blocks, cl, lookup, offsets, layer = inputs
    P, lay = blocks.shape[3], int(layer[0])
    if np.array_equal(got, blocks, equal_nan=True):
        return ["the pool is as it was before the call: the new rows' keys and values were not stored"]
    lines = []
    changed = np.any(differs(got, want), axis=(4, 5))  # [pages, 2, L, PAGE]
    if np.delete(changed, lay, axis=2).any():
        lines.append(f"another layer's keys or values changed: the call stores into layer {lay} (blocks[page, 0 or 1, "
                     "layer, slot]) and no other")
    request, position = positions(offsets, cl)
    rows = np.arange(len(request))
    for says, moved in STORES:
        if np.array_equal(got, stored_at(k, v, blocks, lookup, request, moved(position, rows, cl[request]), lay),
                          equal_nan=True):
            return [*lines, f"the new keys and values were stored as if {says}"]
    page = lookup[request, position // P].astype(np.int64)
    if k.shape[1] > 1 and np.array_equal(got, _heads_first(k, v, blocks, page, position % P, lay), equal_nan=True):
        return [*lines, "the new keys and values were stored head before slot: (head h, slot s) of a page at "
                "(h x PAGE + s) x D floats into blocks[page, 0 or 1, layer], where it is (s x H + h) x D: a slot "
                "holds all H heads of one position, H x D floats (blocks[page, kv, layer, slot, head, d])"]
    keys, values = got[page, 0, lay, position % P], got[page, 1, lay, position % P]  # [T, H, D] where they belong
    if len(request) and np.array_equal(keys, v) and np.array_equal(values, k) and not np.array_equal(k, v):
        lines.append("the keys half of the pool (blocks[page, 0, ...]) holds the new rows' values and the values half "
                     "their keys: the stores into index 0 and 1 read v and k the other way round")
    elif len(request):  # one half holding another of the call's tensors at the new positions
        call = {"q": q, "k": k, "v": v}
        for half, index, own in ((keys, 0, "k"), (values, 1, "v")):
            held = next((label for label, t in call.items()
                         if label != own and np.array_equal(half, t) and not np.array_equal(t, call[own])), None)
            if held is not None:
                lines.append(f"the {'keys' if own == 'k' else 'values'} half of the pool (blocks[page, {index}, ...]) "
                             f"holds the call's {held} at the new positions, where {own} belongs: the store into index "
                             f"{index} reads {held}")
    owner = {}  # (page, slot) -> (request, position): the position each slot of the batch's pages holds
    for b in range(len(cl)):
        for p in range(int(cl[b]) + int(offsets[b + 1] - offsets[b])):
            owner.setdefault((int(lookup[b, p // P]), p % P), (b, p))
    wrong = [(int(pg), int(s)) for pg, s in np.argwhere(changed[:, :, lay].any(axis=1))]
    cached = sorted({owner[at] for at in wrong if at in owner and owner[at][1] < int(cl[owner[at][0]])})
    if cached:
        said = "; ".join(f"request {b} position {p}" for b, p in cached[:6]) + (", ..." if len(cached) > 6 else "")
        lines.append(f"cached positions were written over ({said}): a request's new rows go at positions "
                     "cache_lengths[b] and after, never before (those may sit in pages another request shares)")
    lines += _landed(k, got, lay, request, position, lookup)
    foreign = sorted({pg for pg, s in wrong if (pg, s) not in owner})
    if foreign:
        lines.append(f"slots where no request of the batch has a position were written (pages {ranges(foreign)} of the "
                     "pool): a page or slot computed otherwise than lookup_table[b, p / PAGE] and p % PAGE")
    before = blocks[page, 0, lay, position % P]
    unwritten = [(int(request[r]), int(position[r])) for r in range(len(request))
                 if not np.array_equal(keys[r], k[r]) and np.array_equal(keys[r], before[r], equal_nan=True)]
    if unwritten:
        said = "; ".join(f"request {b} position {p}" for b, p in unwritten[:6])
        lines.append(f"new positions left as they were: {said}{', ...' if len(unwritten) > 6 else ''}")
    return lines or [f"the pool differs from what the call must leave at {int(changed.sum())} slots"]


def _heads_first(k, v, blocks, page, slot, layer) -> np.ndarray:
    """The pool after each row's key and value are stored at page [T], slot [T] laid out [head, slot] within the
    page, not [slot, head]."""
    after = blocks.copy()
    H, P = k.shape[1], blocks.shape[3]
    for h in range(H):
        at_slot, at_head = divmod(h * P + slot, H)  # where (h, slot) lands in the [slot, head] layout
        after[page, 0, layer, at_slot, at_head] = k[:, h]
        after[page, 1, layer, at_slot, at_head] = v[:, h]
    return after


def _landed(k, got, layer, request, position, lookup) -> list[str]:
    """Where the new rows' keys went when not to their own slots, read from the pool: each such row's head-0 key
    found, and named by the request whose page table holds that page and the position it is there (the first
    three)."""
    H, D = k.shape[1], k.shape[2]
    P = got.shape[3]
    flat = got[:, 0, layer].reshape(-1, D)  # [pages x PAGE x H, D]: each (page, slot, head)
    moved = []
    for r in range(len(request)):
        hits = np.flatnonzero((flat == k[r, 0]).all(axis=1))
        if len(hits) != 1 or hits[0] % H:
            continue
        page, slot = divmod(int(hits[0]) // H, P)
        tables = np.argwhere(lookup == page)  # (request, its page index) for every request with that page
        own = [(int(b), int(j) * P + slot) for b, j in tables]
        if (int(request[r]), int(position[r])) not in own:
            where = " or ".join(f"request {b} position {p}" for b, p in own) or f"page {page}, in no page table"
            moved.append(f"row {r} (request {request[r]}, position {position[r]}) at {where}")
    if not moved:
        return []
    return [f"new rows stored at another position: {'; '.join(moved[:3])}{', ...' if len(moved) > 3 else ''}: a "
            "row's request b is the one with input_row_offsets[b] <= r < input_row_offsets[b + 1], its position p "
            "cache_lengths[b] + r - input_row_offsets[b], its slot lookup_table[b, p / PAGE] and p % PAGE"]


def readings(inputs: dict, results: dict, wants: dict) -> list[str]:
    """What the learner's output is, read from it: a variant that computes every case alone; else which rows are
    off by what they share, a factor per row, where NaN appears, and the variant that computes the off rows."""
    names = [case.name for case in judged(wants)]
    got = {name: results[name][0] for name in names}
    exchanged = variants(inputs)
    if (variant := first_variant(names, got, exchanged, KERNEL, AXES)) is not None:
        return [f"your output is attention computed as if {variant.says}, on every case"]
    rows = rows_of(inputs, results, wants)
    lines = []
    if rows.nonfinite.any():
        said = read(rows, rows.nonfinite, OFF)
        lines.append(f"NaN or inf in your output: {said}" if said else
                     f"NaN or inf in your output on {int(rows.nonfinite.sum())} of {len(rows.nonfinite)} rows: a row "
                     "that sees no key (0 / 0), or a read of what no row may read: past a tensor's end (each input "
                     "is surrounded by NaN), or a slot of the pool outside the row's own positions (this check's "
                     "pool holds NaN in the pages no request owns and past each request's cache length until its "
                     "new rows are stored)")
    off = rows.off & ~rows.nonfinite
    c = factors(rows)[off]
    if len(c) and (c == 0).all():  # zeros: no weights, but nothing of the row's own
        lines.append("each off row's output is 0, every value: no attention of its own at all: its values never "
                     "added into its sum, the row never written by the task that owns it, or written over by another "
                     "(a band that stores more rows than it holds, over the next request's first rows)")
    elif len(c) and np.isfinite(c).all():
        lines.append(f"each off row's output is its right output times a number ({c.min():.3g} .. {c.max():.3g}): "
                     "its weights do not sum to 1 (the sum l, its rescaling, or the division at the end)")
    place = "where a row's output is stored, (r x H + h) x D, or which row's q and keys it is computed from"
    if (moved := relocated(rows, rows.off, COORDS, ("row", "rows"), place)) is not None:
        lines.append(moved[0])
    if (said := read(rows, rows.off, OFF, care=rows.features["position"] > 0)) is not None:  # one key: any weights
        lines.append(said)
    computed = [(each, np.concatenate([each.compute(name).reshape(-1, got[name].shape[-1]) for name in names]))
                for each in exchanged]
    if (variant := variant_of_rows(rows, rows.off, computed)) is not None:
        lines.append(f"the off rows, and only they, are attention computed as if {variant.says}")
    return lines
