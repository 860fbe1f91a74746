"""Every trace under some folders, tried the way a new user would: one row per trace.

    .venv/bin/python benchmarks/corpus.py FOLDER... [--perturb] [--workers N] [--timeout S]
        [--only REGEX] [--json OUT.json] [--markdown]

A *trace* is a Kineto file, the rank files of one job (a folder whose files state different
ranks of one world size, or a tar archive of them) replayed together. For each, in a process of
its own (killed after ``--timeout`` seconds):

=================  ==========================================================================
column             what
=================  ==========================================================================
replays            the recording replays (no deadlock, no error)
step err           mean and max |predicted / measured - 1| over the steps of every rank (the
                   trace window where it has no ``ProfilerStep``)
k x0.5             the step change lumos predicts with every compute kernel twice as fast
layers             layers found per rank (one number when the ranks agree), or the decline
invariants         the invariants that need no ground truth (``lumos.estimate.invariants``):
                   the broken ones, named
diagnostics        the counted warnings of the build, most frequent first (and the share of
                   step time frozen at its recorded length, when a dependency had to be cut)
perturbed          with ``--perturb``: the trace rewritten as other recorders and clocks would
                   have written it (``tests/perturb.py``); the worst variant by step error and
                   by the k x0.5 answer (the time it saves, in points of the original's
                   predicted time), compared with the original
s                  seconds for the row
=================  ==========================================================================

A row *passes* when the trace replays with mean step error <= 2 % and max <= 5 %, no invariant
is broken and, with ``--perturb``, every variant replays within 2 % and answers k x0.5 within 2
points of the original. The exit status is 1 when a row fails. Fetched collections are read
where they lie; nothing is copied. CI runs this over ``../shared/realdata`` only
(``tests/graph/test_corpus.py``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import multiprocessing as mp
import os
import re
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as `python benchmarks/corpus.py`: the repository root
    sys.path.insert(0, str(ROOT))

MEAN_LIMIT = 0.02
MAX_LIMIT = 0.05
PERTURB_STEP_LIMIT = 0.02
PERTURB_POINTS_LIMIT = 2.0
_SUFFIXES = (".json", ".json.gz", ".tar.gz", ".tgz", ".tar")
_RANK = re.compile(rb'"distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*(\d+)')
_WORLD = re.compile(rb'"distributedInfo"\s*:\s*\{[^{}]*?"world_size"\s*:\s*(\d+)')


@dataclass
class Unit:
    """One trace: its files (several: the ranks of one job) and a display name."""

    name: str
    paths: list[str]


@dataclass
class Row:
    name: str
    ranks: int = 0
    replays: bool = False
    error: str = ""
    steps: int = 0
    step_err_mean: float | None = None
    step_err_max: float | None = None
    kernels_half_pct: float | None = None
    layers: str = "-"
    invariants_broken: list[str] = field(default_factory=list)
    diagnostics: str = ""
    perturbed: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def passes(self) -> bool:
        if not self.replays or self.invariants_broken:
            return False
        if self.step_err_mean is not None and (
            self.step_err_mean > MEAN_LIMIT or (self.step_err_max or 0) > MAX_LIMIT
        ):
            return False
        return not any(not v.get("ok", True) for v in self.perturbed.values())


# ---- finding traces -----------------------------------------------------------------------


def _head(path: Path) -> bytes:
    """The first 256 KiB of a trace's JSON (gzip opened as a stream)."""
    try:
        if path.name.endswith(".gz") and not path.name.endswith((".tar.gz", ".tgz")):
            with gzip.open(path, "rb") as f:
                return f.read(262144)
        with open(path, "rb") as f:
            return f.read(262144)
    except (OSError, EOFError):
        return b""


def _rank_world(path: Path) -> tuple[int, int] | None:
    head = _head(path)
    r, w = _RANK.search(head), _WORLD.search(head)
    return (int(r.group(1)), int(w.group(1))) if r and w else None


def _is_trace(path: Path) -> bool:
    """Whether lumos recognizes ``path`` (or a member of it) as a Kineto trace, by content."""
    from lumos.errors import LumosError
    from lumos.ingest.detect import expand_paths

    try:
        return any(r.kind == "kineto" for r in expand_paths([path]))
    except LumosError:
        return False


def _stem(p: Path) -> str:
    """A file's name with its digits replaced: the rank files of one job share it."""
    return re.sub(r"\d+", "*", p.name)


def _jobs(files: list[Path]) -> list[list[Path]]:
    """Files of one folder that are the ranks of one job: each rank once, one world size above
    one, named alike but for digits (a folder may hold the ranks of several jobs)."""
    by_stem: dict[tuple[str, int], list[tuple[int, Path]]] = {}
    for p in files:
        rw = _rank_world(p)
        if rw is not None and rw[1] > 1:
            by_stem.setdefault((_stem(p), rw[1]), []).append((rw[0], p))
    out = []
    for (_, world), members in sorted(by_stem.items()):
        ranks = [r for r, _ in members]
        if len(members) > 1 and len(set(ranks)) == len(ranks) and max(ranks) < world:
            out.append([p for _, p in sorted(members)])
    return out


def discover(folders: list[Path]) -> list[Unit]:
    """The traces under ``folders`` (see the module docstring), sorted by name."""
    units: list[Unit] = []
    for folder in folders:
        files = (
            [folder]
            if folder.is_file()
            else sorted(p for p in folder.rglob("*") if p.is_file() and p.name.endswith(_SUFFIXES))
        )
        by_dir: dict[Path, list[Path]] = {}
        for p in files:
            if _is_trace(p):
                by_dir.setdefault(p.parent, []).append(p)
        for d, ps in sorted(by_dir.items()):
            base = folder if folder.is_dir() else folder.parent
            for job in _jobs([p for p in ps if not p.name.endswith((".tar.gz", ".tgz", ".tar"))]):
                units.append(Unit(f"{d.relative_to(base)}/{_stem(job[0])} ({len(job)} ranks)",
                                  [str(p) for p in job]))  # fmt: skip
                ps = [p for p in ps if p not in job]
            for p in ps:
                units.append(Unit(str(p.relative_to(base)) if p != base else p.name, [str(p)]))
    return sorted(units, key=lambda u: u.name)


# ---- checking one trace -------------------------------------------------------------------


def _kernel_mask(g: Any) -> Any:
    from lumos.graph.model import TaskKind

    return g.tasks.kind == int(TaskKind.KERNEL)


def _step_times(rep: Any) -> list[tuple[int, int]]:
    """(measured, predicted) per step of every rank; the window when a rank has no steps."""
    out: list[tuple[int, int]] = []
    for s in rep.summaries:
        steps = [x for x in (s.get("steps") or []) if x.get("measured_ns")]
        if steps:
            out += [(int(x["measured_ns"]), int(x["predicted_ns"])) for x in steps]
        else:
            w = s.get("window_ns") or {}
            m, p = w.get("measured"), w.get("predicted")
            if m and p and m[1] > m[0]:
                out.append((int(m[1] - m[0]), int(p[1] - p[0])))
    return out


@dataclass
class _Replayed:
    workload: Any
    times: list[tuple[int, int]]  # (measured, predicted) per step, or the window
    saved_ns: int | None  # predicted time every compute kernel x0.5 saves (None: no kernels)

    @property
    def predicted_ns(self) -> int:
        return sum(p for _, p in self.times)

    @property
    def kernels_half_pct(self) -> float | None:
        if self.saved_ns is None or not self.predicted_ns:
            return None
        return -100.0 * self.saved_ns / self.predicted_ns


def _replay(paths: list[str]) -> _Replayed:
    """The replay of a trace, and what 'every compute kernel twice as fast' saves."""
    from lumos.replay import build_workload, replay

    w, _ = build_workload(paths, workers=1)
    times = _step_times(replay(w))
    if not any(_kernel_mask(g).any() for g in w.graphs):
        return _Replayed(w, times, None)
    half = w.replace_graphs(g.scale(_kernel_mask(g), 0.5) for g in w.graphs)
    faster = _step_times(replay(half))
    return _Replayed(w, times, sum(p for _, p in times) - sum(p for _, p in faster))


def _errors(times: list[tuple[int, int]]) -> tuple[float | None, float | None]:
    errs = [abs(p / m - 1) for m, p in times if m > 0]
    if not errs:
        return None, None
    return sum(errs) / len(errs), max(errs)


def _layers(w: Any) -> str:
    try:
        from lumos.estimate.baseline import detect_baseline

        base = detect_baseline(w)
    except Exception as exc:  # a detection that fails is a row to read, not a crash
        return f"error: {exc}"[:80]
    v = base.values.get("layers") if hasattr(base, "values") else None
    how = base.how.get("layers", "") if hasattr(base, "how") else ""
    return f"{v}" if v is not None else f"declined: {how}"[:80]


def _invariants(w: Any) -> list[str]:
    try:
        from lumos.estimate.invariants import check_invariants  # type: ignore[import-not-found]
    except ImportError:
        return []
    try:
        return [r.name for r in check_invariants(w) if not r.ok]
    except Exception as exc:
        return [f"error: {exc}"[:80]]


def _diagnostics(w: Any) -> str:
    counts: dict[str, int] = {}
    frozen = ""
    for g in w.graphs:
        for code in g.diagnostics:
            counts[code] = counts.get(code, 0) + g.diagnostics.count(code)
            if code == "dependency_unsatisfiable":
                frozen = g.diagnostics.example(code).rsplit(": ", 1)[-1]
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:4]
    text = ", ".join(f"{c} {n}" for c, n in top)
    return text + (f" [cut: {frozen}]" if frozen else "")


def _perturbed(unit: Unit, original: _Replayed) -> dict[str, Any]:
    """Each variant's replay error, and how far its k x0.5 answer is from the original's: the
    difference of the times saved, in points of the original's predicted time (a window that
    ends with GPU work on an unknown clock changes its length, not the time saved)."""
    from tests.perturb import JOB_VARIANTS, VARIANTS, load, write

    out: dict[str, Any] = {}
    docs = list(_documents(unit.paths, load).values())
    variants: dict[str, Any] = {
        k: (lambda ds, f=f: [f(d) for d in ds]) for k, f in VARIANTS.items()
    }
    if len(docs) > 1:
        variants.update(JOB_VARIANTS)
    with tempfile.TemporaryDirectory() as tmp:
        for name, fn in variants.items():
            paths = [str(write(doc, Path(tmp) / f"{i}.{name}.json.gz"))
                     for i, doc in enumerate(fn(docs))]  # fmt: skip
            try:
                v = _replay(paths)
            except Exception as exc:
                out[name] = {"ok": False, "error": str(exc)[:160]}
                continue
            _, mx = _errors(v.times)
            pts = None
            if original.saved_ns is not None and v.saved_ns is not None and original.predicted_ns:
                pts = 100.0 * abs(v.saved_ns - original.saved_ns) / original.predicted_ns
            ok = (mx is None or mx <= PERTURB_STEP_LIMIT) and (
                pts is None or pts <= PERTURB_POINTS_LIMIT
            )
            out[name] = {"ok": ok, "step_err_max": mx, "kernels_half_pct": v.kernels_half_pct,
                         "points": pts}  # fmt: skip
            for p in paths:
                os.unlink(p)
    return out


def _documents(paths: list[str], load: Any) -> dict[str, Any]:
    """The JSON document of every Kineto trace of the unit (tar archives: each member)."""
    from lumos.ingest.detect import expand_paths

    out: dict[str, Any] = {}
    for p in paths:
        if p.endswith((".tar.gz", ".tgz", ".tar")):
            for ref in expand_paths([p]):
                if ref.kind == "kineto":
                    out[ref.where] = json.loads(ref.read())
        else:
            out[p] = load(p)
    return out


def check(unit: Unit, perturb: bool = False) -> Row:
    """Every check of one trace (see the module docstring)."""
    t0 = time.perf_counter()
    row = Row(unit.name)
    try:
        r = _replay(unit.paths)
        w = r.workload
        row.ranks = len(w.graphs)
        row.replays = True
        row.steps = len(r.times)
        row.step_err_mean, row.step_err_max = _errors(r.times)
        row.kernels_half_pct = r.kernels_half_pct
        row.layers = _layers(w)
        row.invariants_broken = _invariants(w)
        row.diagnostics = _diagnostics(w)
        if perturb:
            row.perturbed = _perturbed(unit, r)
    except Exception as exc:
        row.error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        if os.environ.get("LUMOS_CORPUS_TRACEBACK"):
            traceback.print_exc()
    row.seconds = time.perf_counter() - t0
    return row


# ---- running many -------------------------------------------------------------------------


def _worker(unit: Unit, perturb: bool, q: Any) -> None:
    q.put(asdict(check(unit, perturb)))


def run(
    units: list[Unit], *, perturb: bool = False, workers: int = 1, timeout_s: float = 600
) -> list[Row]:
    """Check every unit, ``workers`` at a time, each in a process of its own."""
    ctx = mp.get_context("spawn")
    pending = list(enumerate(units))
    running: dict[int, tuple[Any, Any, float]] = {}
    rows: dict[int, Row] = {}
    while pending or running:
        while pending and len(running) < max(workers, 1):
            i, u = pending.pop(0)
            q = ctx.Queue()
            p = ctx.Process(target=_worker, args=(u, perturb, q), daemon=True)
            p.start()
            running[i] = (p, q, time.perf_counter())
        time.sleep(0.05)
        for i, (p, q, t) in list(running.items()):
            if not q.empty():
                rows[i] = Row(**q.get())
            elif p.is_alive() and time.perf_counter() - t <= timeout_s:
                continue
            elif p.is_alive():
                p.kill()
                rows[i] = Row(units[i].name, error=f"timed out after {timeout_s:.0f} s",
                              seconds=timeout_s)  # fmt: skip
            elif i not in rows:
                rows[i] = Row(units[i].name, error=f"worker died (exit {p.exitcode})")
            p.join()
            del running[i]
    return [rows[i] for i in range(len(units))]


def _pct(x: float | None) -> str:
    return "-" if x is None or math.isnan(x) else f"{100 * x:.2f}%"


def table(rows: list[Row], markdown: bool = False) -> str:
    head = ["trace", "ranks", "replays", "step err mean/max", "k x0.5", "layers",
            "invariants", "diagnostics", "perturbed", "s", "pass"]  # fmt: skip
    lines = []
    for r in rows:
        worst = ""
        if r.perturbed:
            bad = [k for k, v in r.perturbed.items() if not v.get("ok", True)]
            pts = [v["points"] for v in r.perturbed.values() if v.get("points") is not None]
            err = [
                v["step_err_max"] for v in r.perturbed.values() if v.get("step_err_max") is not None
            ]
            worst = (f"{len(r.perturbed) - len(bad)}/{len(r.perturbed)} ok; worst step "
                     f"{_pct(max(err, default=None))}, k {max(pts, default=0):.2f} pts"
                     + (f"; FAIL {', '.join(bad)}" if bad else ""))  # fmt: skip
        lines.append([
            r.name, str(r.ranks), "yes" if r.replays else f"NO: {r.error}",
            f"{_pct(r.step_err_mean)} / {_pct(r.step_err_max)}",
            "-" if r.kernels_half_pct is None else f"{r.kernels_half_pct:+.1f}%",
            r.layers, ", ".join(r.invariants_broken) or "ok", r.diagnostics, worst,
            f"{r.seconds:.1f}", "yes" if r.passes else "NO",
        ])  # fmt: skip
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        out += ["| " + " | ".join(c.replace("|", "/") for c in line) + " |" for line in lines]
        return "\n".join(out)
    return "\n".join("\t".join(line) for line in [head, *lines])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks/corpus.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--perturb", action="store_true")
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--only", default="", help="regex on the trace names")
    ap.add_argument("--json", type=Path, help="write the rows here")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args(argv)
    units = [u for u in discover(a.folders) if re.search(a.only, u.name)]
    rows = run(units, perturb=a.perturb, workers=a.workers, timeout_s=a.timeout)
    print(table(rows, a.markdown))
    n_pass = sum(r.passes for r in rows)
    print(f"\n{n_pass} of {len(rows)} traces pass", file=sys.stderr)
    if a.json:
        a.json.write_text(json.dumps([asdict(r) | {"passes": r.passes} for r in rows], indent=1))
    return 0 if n_pass == len(rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
