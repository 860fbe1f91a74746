"""What ``lumos bench SOURCE...`` runs: the trace of each rank, and the timing to compare with.

======================================  =====================================================
SOURCE                                  runs, and compares with
======================================  =====================================================
a run directory (``run.json``) of       each rank's ``rank<r>.et.json``; its steps are
``lumos collect --et``                  timed by the rank's Kineto trace of the same steps
PyTorch ET files, folders, archives     each ET (rank from ``distributedInfo``, else its
                                        name); Kineto traces given beside them time the ET
                                        of their rank; without one, no source timing
Chakra ETs: files or a ``PREFIX`` of    each rank's file; the source time of a step is its
``PREFIX.<rank>.et``                    replay by lumos (what the ET says it takes: the
                                        recording for a converted ET, the estimate for an
                                        ``estimate --chakra`` scenario)
======================================  =====================================================

A source mixing PyTorch and Chakra ETs, or with none, is refused naming the paths.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lumos.collect.manifest import MANIFEST_NAME, read_manifest
from lumos.errors import ConfigError, InputError, NoTracesError
from lumos.ingest.detect import TraceRef, expand_paths

__all__ = ["BenchSource", "RankSource", "resolve_source"]


@dataclass(frozen=True)
class RankSource:
    """One rank: the trace to run (``path`` and, inside a tar archive, ``member``), the
    Kineto trace that timed it, if any, and the torch intra-op threads it ran with, when its
    recorder said (``lumos collect`` does)."""

    rank: int
    path: str
    member: str | None = None
    kineto: TraceRef | None = None
    threads: int | None = None


@dataclass(frozen=True)
class BenchSource:
    """Every rank of the source. ``kind`` is ``pytorch_et`` or ``chakra``; ``timing`` says
    where source step times come from (``recorded``, ``replayed`` or None);
    ``execution_trace`` whether the timed run recorded an Execution Trace as it ran, ``memory``
    whether it recorded allocations and frees (``lumos collect``'s default)."""

    kind: str
    ranks: tuple[RankSource, ...]
    timing: str | None
    execution_trace: bool = False
    paths: tuple[str, ...] = field(default=())
    memory: bool = False

    @property
    def rank_ids(self) -> tuple[int, ...]:
        return tuple(r.rank for r in self.ranks)


def _run_dir(p: Path) -> BenchSource:
    run = read_manifest(p)
    missing = [r.rank for r in run.ranks if r.et is None]
    if missing:
        raise InputError(p / MANIFEST_NAME, f"rank {missing[0]} recorded no Execution Trace: "
                         "collect the run with lumos collect --et")  # fmt: skip
    ranks = []
    for r in run.ranks:
        assert r.et is not None
        kin = expand_paths([r.kineto])[0]
        ranks.append(RankSource(r.rank, str(r.et), None, kin, r.intra_op_threads))
    return BenchSource("pytorch_et", tuple(ranks), "recorded",
                       bool(run.data.get("execution_trace")), (str(p),),
                       bool(run.data.get("memory")))  # fmt: skip


_RANK_FILE = re.compile(r"\.(\d+)\.et(?:\.gz)?$")


def _chakra(prefixes: Sequence[str], files: Sequence[str]) -> BenchSource:
    from lumos.chakra.io import rank_files

    found: dict[int, Path] = {}
    named = [(int(m.group(1)) if (m := _RANK_FILE.search(f)) else -1, Path(f)) for f in files]
    if len(named) == 1 and named[0][0] < 0:
        named = [(0, named[0][1])]
    for p in prefixes:
        named.extend(rank_files(p)[1].items())
    for r, f in named:
        if r < 0:
            raise InputError(f, "cannot tell its rank: name Chakra ETs <prefix>.<rank>.et")
        if r in found and found[r] != f:
            raise InputError(f, f"a second Chakra ET for rank {r} (first: {found[r]})")
        found[r] = f
    ranks = tuple(RankSource(r, str(f)) for r, f in sorted(found.items()))
    return BenchSource("chakra", ranks, "replayed", False, (*prefixes, *files))


def resolve_source(paths: Sequence[str | os.PathLike[str]]) -> BenchSource:
    """The ranks of ``paths`` (see the module docstring)."""
    names = [str(p) for p in paths]
    if not names:
        raise ConfigError("lumos bench needs a SOURCE: a run directory, PyTorch ETs or Chakra ETs")
    if len(names) == 1 and Path(names[0]).is_dir() and (Path(names[0]) / MANIFEST_NAME).is_file():
        return _run_dir(Path(names[0]))
    refs: list[TraceRef] = []
    prefixes: list[str] = []
    for p in names:
        if not Path(p).exists() and Path(p).parent.is_dir():
            prefixes.append(p)  # PREFIX of PREFIX.<rank>.et
        else:
            refs.extend(expand_paths([p]))
    kinds = {r.kind for r in refs} | ({"chakra"} if prefixes else set())
    if "chakra" in kinds:
        if "pytorch_et" in kinds:
            raise InputError(", ".join(names), "holds PyTorch ETs and Chakra ETs: bench one kind")
        return _chakra(prefixes, [str(r.path) for r in refs if r.kind == "chakra"])
    ets = [r for r in refs if r.kind == "pytorch_et"]
    if not ets:
        raise NoTracesError(", ".join(names), "no PyTorch ET or Chakra ET to run "
                            "(Kineto traces have no arguments to run ops with)")  # fmt: skip
    from lumos.convert import refs_by_rank

    kineto = [r for r in refs if r.kind == "kineto"]
    if len(ets) == 1 and len(kineto) <= 1:
        et_of = {next(iter(refs_by_rank(ets, "PyTorch ET"))): ets[0]}
        kin_of = {next(iter(et_of)): kineto[0]} if kineto else {}
    else:
        et_of = refs_by_rank(ets, "PyTorch ET")
        kin_of = refs_by_rank(kineto, "Kineto trace") if kineto else {}
    ranks = tuple(RankSource(r, str(ref.path), ref.member, kin_of.get(r))
                  for r, ref in sorted(et_of.items()))  # fmt: skip
    timing = "recorded" if any(r.kineto is not None for r in ranks) else None
    memory = any(_has_memory_events(r.kineto) for r in ranks if r.kineto is not None)
    return BenchSource("pytorch_et", ranks, timing, timing is not None, tuple(names), memory)


def _has_memory_events(ref: TraceRef) -> bool:
    """Whether a Kineto trace holds ``[memory]`` events (recorded with ``profile_memory``)."""
    return ref.payload().find(b'"[memory]"') >= 0
