"""Cut the ``traceEvents`` array of a Kineto JSON payload into chunks without parsing it.

A compiled scan tracks string/escape state and nesting depth to find the array's brackets and
the comma after every ``chunk``-th element. Each chunk is then decoded on its own, so a
multi-GB trace never has all its decoded events in memory at once. Anything the scan cannot
place (no ``"traceEvents"`` key, unbalanced brackets) returns ``None`` and the caller decodes
the whole document instead, which also produces the precise JSON error.
"""

from __future__ import annotations

import re

import numba
import numpy as np

from lumos._jit import INT64, Kernel, array

__all__ = ["split_events"]

_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')


@numba.njit(cache=True, nogil=True)
def _scan_events(
    buf: np.ndarray, pos: int, every: int, cuts: np.ndarray
) -> tuple[int, int, int]:  # pragma: no cover - compiled
    """Scan from just after ``[``; returns (number of elements, cuts used, index of ``]``).

    ``cuts`` receives the offset of the comma that follows every ``every``-th element.
    """
    n = len(buf)
    depth = 0
    in_str = False
    esc = False
    count = 0
    used = 0
    started = False
    i = pos
    while i < n:
        c = buf[i]
        if in_str:
            if esc:
                esc = False
            elif c == 92:
                esc = True
            elif c == 34:
                in_str = False
        elif c == 34:
            in_str = True
            started = True
        elif c == 123 or c == 91:
            depth += 1
            started = True
        elif c == 125 or c == 93:
            if depth == 0:
                if c == 93:
                    if started:
                        count += 1
                    return count, used, i
                return -1, used, i
            depth -= 1
        elif c == 44 and depth == 0:
            count += 1
            started = False
            if count % every == 0:
                if used == len(cuts):
                    return -1, used, i
                cuts[used] = i
                used += 1
        elif c > 32:
            started = True
        i += 1
    return -1, used, n


#: ``_scan(buf, pos, every, cuts, work=len(buf))``; never interpreted (a Python loop over bytes
#: is slow): only payloads of :data:`lumos.ingest.kineto.SPLIT_MIN_BYTES` or more are split.
_scan = Kernel(
    _scan_events,
    (array(np.uint8), INT64, INT64, array(np.int64, writes=True)),
    max_interpreted=0,
)


def split_events(
    payload: bytes, chunk: int = 20_000
) -> tuple[bytes, list[tuple[int, int]], int] | None:
    """``(document without its events, [(start, stop) byte ranges of event chunks], count)``.

    Each range holds whole elements separated by commas (no leading or trailing comma), ready
    to be wrapped in ``[...]``. Returns None when the layout is not the usual one.
    """
    m = _KEY.search(payload, 0, min(len(payload), 1 << 20))
    if m is None:
        m = _KEY.search(payload)
        if m is None:
            return None
    open_end = m.end()
    buf = np.frombuffer(payload, dtype=np.uint8)
    cuts = np.empty(len(payload) // (3 * chunk) + 16, dtype=np.int64)
    count, used, close = _scan(buf, open_end, chunk, cuts, work=len(buf))
    if count < 0:
        return None
    ranges = []
    start = open_end
    for c in cuts[:used].tolist():
        ranges.append((start, c))
        start = c + 1
    ranges.append((start, close))
    rest = payload[:open_end] + payload[close:]
    return rest, [r for r in ranges if payload[r[0] : r[1]].strip()], count
