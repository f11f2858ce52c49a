"""A ragged batch in numpy: each row's position and each request's last row, right and as the known
mistakes compute them (step 14's reference; the book draws the same batch).

    positions(offsets [B + 1], cached [B]) -> [rows]      the position of every new row
    last_rows(offsets [B + 1]) -> [B]                     each request's last new row
"""

from __future__ import annotations

import numpy as np

# The book's worked example: 4 requests, new rows 5, 1, 4, 1, cached 0, 7, 0, 3.
OFFSETS = np.array([0, 5, 6, 10, 11], dtype=np.uint32)
CACHED = np.array([0, 7, 0, 3], dtype=np.uint32)
# Step 14's positions and last-rows parts: the worked example and a fifth request, a chunk of 3 rows after 16
# cached (a long prompt's second chunk, or a prompt whose start MAX's prefix cache held): rows 16, 17, 18.
CHECKED_OFFSETS = np.append(OFFSETS, OFFSETS[-1] + 3).astype(np.uint32)
CHECKED_CACHED = np.append(CACHED, 16).astype(np.uint32)


def positions(offsets: np.ndarray, cached: np.ndarray, rule: str = "right") -> np.ndarray:
    """Each row's position. rule: "right"; "not-offset" (the cache ignored: 0, 1, ... per request);
    "batch-rows" (the row's index in the whole batch, plus its request's cache)."""
    offsets, cached = offsets.astype(np.int64), cached.astype(np.int64)
    owner = np.repeat(np.arange(len(cached)), np.diff(offsets))
    rows = np.arange(offsets[-1])
    return {"right": rows - offsets[owner] + cached[owner], "not-offset": rows - offsets[owner],
            "batch-rows": rows + cached[owner]}[rule]


def last_rows(offsets: np.ndarray, rule: str = "right") -> np.ndarray:
    """Each request's last new row. rule: "right"; "first" (where each request starts); "past" (where the
    next request starts: the last request's is past the batch)."""
    offsets = offsets.astype(np.int64)
    return {"right": offsets[1:] - 1, "first": offsets[:-1], "past": offsets[1:]}[rule]
