"""Per-rank graph builds that share structure: one build per distinct trace, re-stamped per rank.

A job's ranks often record the same bytes but for who they are: a replicated or synthetic run,
or ranks that ran the same program in lockstep. :func:`build_ranks` reads every trace once
(in threads) to take its *fingerprint*: a digest of the decompressed
payload with the two numbers of its top-level ``distributedInfo`` that name the rank
(``"rank"``, ``"world_size"``) left out. Traces with equal fingerprints differ in those two
numbers only, so the graph of one (its *representative*) is every other's graph with its rank
re-stamped (``ExecGraph.replace(rank=...)``; the arrays are shared, not copied).

That holds because the build reads the rank only to stamp it, with two exceptions, and a
trace falls back to its own build when either could apply: ``world_size`` missing or not above
the rank (the graph's world size then depends on the rank), and sends/receives whose peer is
inferred from the rank (diagnostic ``p2p_peer_inferred_from_group_of_two``). The representative
must also read back the rank and world size the fingerprint found, so that the numbers left out
are the ones the build stamps. Chakra ETs and traces without such a ``distributedInfo`` are
built one by one, as before. The cost for a job of distinct traces: each is read once more, to
hash it. A build that fails names the representative's file (its copies hold the same bytes).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from lumos.graph.model import ExecGraph
from lumos.ingest.detect import TraceRef
from lumos.parallel import default_workers, map_ranks

__all__ = ["Fingerprint", "build_ranks", "fingerprint", "fingerprint_bytes"]

_INFO = re.compile(rb'"distributedInfo"\s*:\s*\{')
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[{}\[\]]')
_NUMBER = re.compile(rb"\s*:\s*(-?\d+)")
_KEYS = {b'"rank"': "rank", b'"world_size"': "world_size"}
#: Rank-dependent inference that makes a graph more than its representative re-stamped.
_RANK_DEPENDENT = ("p2p_peer_inferred_from_group_of_two",)


@dataclass(frozen=True)
class Fingerprint:
    """A trace's digest without its rank, and the rank and world size it names (-1: the
    trace cannot share its build; then ``digest`` is unique to it)."""

    digest: bytes
    rank: int = -1
    world_size: int = -1

    @property
    def shareable(self) -> bool:
        return 0 <= self.rank < self.world_size


def fingerprint_bytes(payload: bytes) -> Fingerprint:
    """The fingerprint of a Kineto JSON payload (see the module docstring)."""
    h = hashlib.sha256()  # hardware-accelerated on x86-64 and arm64: ~3x blake2b
    found = _rank_fields(payload)
    if found is None:
        h.update(payload)
        return Fingerprint(b"whole:" + h.digest())
    values, spans = found
    pos = 0
    for lo, hi in spans:  # hash around the numbers; their positions are in what is hashed
        h.update(payload[pos:lo])
        h.update(b"\x00")
        pos = hi
    h.update(payload[pos:])
    fp = Fingerprint(b"ranked:" + h.digest(), values["rank"], values["world_size"])
    return fp if fp.shareable else Fingerprint(b"whole:" + h.digest())


def _rank_fields(payload: bytes) -> tuple[dict[str, int], list[tuple[int, int]]] | None:
    """The values and byte spans of ``rank`` and ``world_size`` directly inside the first
    top-level-looking ``"distributedInfo": {...}``; None unless both are integers there."""
    m = _INFO.search(payload)
    if m is None:
        return None
    depth, values, spans = 1, {}, []
    for tok in _TOKEN.finditer(payload, m.end()):
        t = tok.group()
        if t in (b"{", b"["):
            depth += 1
        elif t in (b"}", b"]"):
            depth -= 1
            if depth == 0:
                break
        elif depth == 1 and t in _KEYS:
            num = _NUMBER.match(payload, tok.end())
            if num is None or _KEYS[t] in values:
                return None
            values[_KEYS[t]] = int(num.group(1))
            spans.append(num.span(1))
    if len(values) != 2:
        return None
    return values, spans


def fingerprint(ref: TraceRef) -> Fingerprint:
    """The fingerprint of a trace on disk (a Chakra ET's is unique to its path)."""
    if ref.kind != "kineto":
        return Fingerprint(b"path:" + ref.where.encode())
    return fingerprint_bytes(ref.read())


def build_ranks(
    build: Callable[[TraceRef], ExecGraph],
    refs: Sequence[TraceRef],
    *,
    workers: int | None = None,
    dask_address: str | None = None,
    on_done: Callable[[int], None] | None = None,
) -> tuple[list[ExecGraph], int]:
    """``[build(r) for r in refs]`` with one build per fingerprint (see the module docstring),
    in parallel; also returns how many builds ran. ``on_done(i)`` as trace ``i``'s graph is
    ready."""
    if len(refs) <= 1:
        one = map_ranks(build, refs, workers=workers, dask_address=dask_address, on_done=on_done)
        return one, len(refs)
    fps = _fingerprints(refs, workers)
    first: dict[bytes, int] = {}
    for i, fp in enumerate(fps):
        first.setdefault(fp.digest if fp.shareable else b"%d" % i, i)
    reps = sorted(first.values())
    graphs: list[ExecGraph | None] = [None] * len(refs)

    def rep_done(k: int) -> None:
        if on_done:
            on_done(reps[k])

    built = map_ranks(
        build, [refs[i] for i in reps], workers=workers, dask_address=dask_address,
        on_done=rep_done,
    )  # fmt: skip
    for i, g in zip(reps, built, strict=True):
        graphs[i] = g
    own = [i for i, fp in enumerate(fps)
           if graphs[i] is None and not _restamp(graphs, fps, first[fp.digest], i)]  # fmt: skip
    if own:  # the representative did not vouch for them: each its own build
        for i, g in zip(own, map_ranks(build, [refs[i] for i in own], workers=workers,
                                       dask_address=dask_address), strict=True):  # fmt: skip
            graphs[i] = g
    if on_done:
        rep_set = set(reps)
        for i in range(len(refs)):
            if i not in rep_set:
                on_done(i)
    out = [g for g in graphs if g is not None]
    assert len(out) == len(refs)
    return out, len(reps) + len(own)


def _fingerprints(refs: Sequence[TraceRef], workers: int | None) -> list[Fingerprint]:
    """Every trace's fingerprint, in threads of this process: reading, decompressing and
    hashing release the GIL, and nothing is sent to another process."""
    n = default_workers() if workers is None else max(1, workers)
    if n == 1:
        return [fingerprint(r) for r in refs]
    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(fingerprint, refs))


def _restamp(graphs: list[ExecGraph | None], fps: Sequence[Fingerprint], rep: int, i: int) -> bool:
    """Fill ``graphs[i]`` from its representative's (``rep``) graph; False when that would not
    be exact."""
    fp = fps[i]
    g = graphs[rep]
    assert g is not None
    if g.rank != fps[rep].rank or g.world_size != fps[rep].world_size:
        return False  # the numbers left out are not the ones the build stamps
    if any(g.diagnostics.count(code) for code in _RANK_DEPENDENT):
        return False
    graphs[i] = g.replace(rank=fp.rank, world_size=fp.world_size, diagnostics=g.diagnostics.copy())
    return True
