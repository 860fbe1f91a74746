"""The run directory's layout and its ``run.json`` manifest.

A collected run is one directory::

    <run>/run.json                  the manifest (this module)
    <run>/rank<R>.kineto.json.gz    Kineto trace of rank R (gzip; readers sniff it)
    <run>/rank<R>.et.json           PyTorch Execution Trace of rank R (only with ET on)
    <run>/rank<R>.meta.json         what rank R wrote about itself; merged into run.json

Each rank writes its own ``rank<R>.meta.json`` (no rank needs to know when the others finish);
:func:`write_manifest` merges every rank record present into ``run.json``. The hook calls it
after a barrier on rank 0, and ``lumos collect`` calls it again when the command exits, adding
the command line and exit status. Every file is written atomically.

``run.json`` (``format`` = ``"lumos.run"``, ``version`` = 1)::

    {"format": "lumos.run", "version": 1, "lumos_version": "0.1.0", "torch_version": "2.13.0",
     "world_size": 2, "backend": "gloo", "device": "cpu", "parallel": {"dp": 2},
     "schedule": {"wait": 1, "warmup": 1, "active": 2}, "execution_trace": true, "memory": true,
     "command": ["torchrun", ...], "exit_code": 0, "complete": true,
     "ranks": [{"rank": 0, "host": "h", "pid": 1, "device": "cpu", "intra_op_threads": 1,
                "kineto": "rank0.kineto.json.gz", "et": "rank0.et.json", "argv": [...]}, ...]}

``intra_op_threads`` is the rank's ``torch.get_num_threads()`` as it recorded (``torchrun``
sets ``OMP_NUM_THREADS=1`` for several ranks per node): what a run's CPU ops took depends on it,
so ``lumos bench`` runs with the same (null in runs collected before it was recorded).
Paths inside the manifest are relative to the run directory, so a run directory can be moved.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lumos._io import atomic_write
from lumos._version import __version__
from lumos.errors import InputError, NoTracesError

__all__ = [
    "MANIFEST_NAME",
    "RankFiles",
    "RunManifest",
    "et_name",
    "kineto_name",
    "meta_name",
    "read_manifest",
    "write_manifest",
    "write_rank_record",
]

MANIFEST_NAME = "run.json"
FORMAT = "lumos.run"
VERSION = 1
_META_RE = re.compile(r"^rank(\d+)\.meta\.json$")


def kineto_name(rank: int) -> str:
    """File name of rank ``rank``'s Kineto trace inside the run directory."""
    return f"rank{rank}.kineto.json.gz"


def et_name(rank: int) -> str:
    """File name of rank ``rank``'s PyTorch Execution Trace inside the run directory."""
    return f"rank{rank}.et.json"


def meta_name(rank: int) -> str:
    """File name of rank ``rank``'s own record, merged into ``run.json``."""
    return f"rank{rank}.meta.json"


@dataclass(frozen=True, kw_only=True)
class RankFiles:
    """One rank's entry in a manifest; paths are absolute (resolved against the run directory)."""

    rank: int
    kineto: Path
    et: Path | None
    device: str
    intra_op_threads: int | None = None


@dataclass(frozen=True, kw_only=True)
class RunManifest:
    """A parsed ``run.json``: the run's facts plus each rank's files, ordered by rank."""

    run_dir: Path
    world_size: int
    ranks: tuple[RankFiles, ...]
    data: dict[str, Any]

    @property
    def complete(self) -> bool:
        """True when every rank ``0 .. world_size-1`` left its traces."""
        return bool(self.data.get("complete"))


def write_rank_record(run_dir: str | os.PathLike[str], record: dict[str, Any]) -> Path:
    """Write one rank's record (must hold ``rank``) as ``rank<R>.meta.json``; returns its path."""
    path = Path(run_dir) / meta_name(int(record["rank"]))
    with atomic_write(path) as f:
        json.dump(record, f, indent=1, sort_keys=True)
        f.write("\n")
    return path


def _load_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(path, "no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(path, f"not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(path, "expected a JSON object")
    return data


def build_manifest(
    run_dir: str | os.PathLike[str],
    *,
    command: Sequence[str] | None = None,
    exit_code: int | None = None,
) -> dict[str, Any]:
    """The manifest of ``run_dir`` as a dict, merged from the rank records found there.

    Raises :class:`~lumos.errors.NoTracesError` when no rank left a record. Run-wide facts
    (world size, backend, schedule, parallel degrees) come from the lowest rank; ``complete``
    says whether every rank of the world left its Kineto trace.
    """
    root = Path(run_dir)
    if not root.is_dir():
        raise NoTracesError(root, "run directory does not exist")
    found: list[tuple[int, Path]] = []
    for p in root.iterdir():
        m = _META_RE.match(p.name)
        if m:
            found.append((int(m.group(1)), p))
    if not found:
        raise NoTracesError(root, "no rank records (rank<R>.meta.json): did the job call the hook?")
    records = [_load_json(p) for _, p in sorted(found)]
    first = records[0]
    world_size = int(first.get("world_size", len(records)))
    ranks = []
    for rec in records:
        ranks.append(
            {
                "rank": int(rec["rank"]),
                "host": rec.get("host"),
                "pid": rec.get("pid"),
                "device": rec.get("device"),
                "intra_op_threads": rec.get("intra_op_threads"),
                "kineto": rec.get("kineto"),
                "et": rec.get("et"),
                "argv": rec.get("argv"),
            }
        )
    present = {r["rank"] for r in ranks if r["kineto"] and (root / str(r["kineto"])).is_file()}
    manifest: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "lumos_version": __version__,
        "torch_version": first.get("torch_version"),
        "world_size": world_size,
        "backend": first.get("backend"),
        "device": first.get("device_type"),
        "parallel": first.get("parallel", {}),
        "schedule": first.get("schedule", {}),
        "execution_trace": bool(first.get("et")),
        "memory": bool(first.get("memory")),
        "command": list(command) if command is not None else first.get("argv"),
        "exit_code": exit_code,
        "complete": all(r in present for r in range(world_size)),
        "ranks": ranks,
    }
    return manifest


def write_manifest(
    run_dir: str | os.PathLike[str],
    *,
    command: Sequence[str] | None = None,
    exit_code: int | None = None,
) -> Path:
    """Merge the rank records of ``run_dir`` into ``run.json`` (atomically); returns its path."""
    manifest = build_manifest(run_dir, command=command, exit_code=exit_code)
    path = Path(run_dir) / MANIFEST_NAME
    with atomic_write(path) as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    return path


def read_manifest(run_dir: str | os.PathLike[str]) -> RunManifest:
    """Parse ``run_dir/run.json`` (or a path to the manifest itself).

    Raises :class:`~lumos.errors.InputError` naming the file when it is missing, not JSON, not a
    lumos run manifest, or names a trace file that does not exist.
    """
    p = Path(run_dir)
    path = p if p.is_file() else p / MANIFEST_NAME
    root = path.parent
    data = _load_json(path)
    if data.get("format") != FORMAT:
        raise InputError(path, f"not a lumos run manifest (format={data.get('format')!r})")
    ranks = []
    for entry in data.get("ranks", []):
        try:
            rank = int(entry["rank"])
            kineto = root / str(entry["kineto"])
        except (KeyError, TypeError, ValueError):
            raise InputError(path, f"malformed rank entry: {entry!r}") from None
        if not kineto.is_file():
            raise InputError(path, f"rank {rank}'s Kineto trace {kineto.name} is missing")
        et = root / str(entry["et"]) if entry.get("et") else None
        if et is not None and not et.is_file():
            raise InputError(path, f"rank {rank}'s execution trace {et.name} is missing")
        threads = entry.get("intra_op_threads")
        if threads is not None and (not isinstance(threads, int) or threads < 1):
            raise InputError(path, f"rank {rank}'s intra_op_threads must be a positive integer, "
                             f"got {threads!r}")  # fmt: skip
        ranks.append(RankFiles(rank=rank, kineto=kineto, et=et, device=str(entry.get("device")),
                               intra_op_threads=threads))  # fmt: skip
    if not ranks:
        raise NoTracesError(path, "manifest lists no ranks")
    return RunManifest(
        run_dir=root,
        world_size=int(data.get("world_size", len(ranks))),
        ranks=tuple(sorted(ranks, key=lambda r: r.rank)),
        data=data,
    )
