"""``lumos link ET KINETO``: join a PyTorch Execution Trace to its Kineto trace, per rank.

Each argument is a trace file (plain or gzip) or a tar archive of per-rank traces. With archives,
ranks are paired: a Kineto trace's rank comes from its ``distributedInfo`` (else its file name), an
ET's from its ``distributedInfo`` (else its file name: ``rank3``, ``worker3``, ``..._3.json``).
Prints the per-rank report (``--json``: one JSON object per rank). Exit 1 when a rank
links below ``--min-rate``.

``-o DIR`` also writes, per rank, the merged host+device trace that upstream's
``chakra_trace_link`` writes (:mod:`lumos.link.merge`): ``DIR/host_device_<rank>.json``, a
PyTorch ET whose ops carry the Kineto timing and whose GPU kernels are child nodes of their op.
``lumos info`` and ``lumos convert`` (with the Kineto trace) read it back.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from lumos._io import atomic_write
from lumos.errors import InputError
from lumos.ingest.detect import TraceRef, expand_paths
from lumos.ingest.kineto import KinetoTrace, read_kineto
from lumos.ingest.pytorch_et import HostTrace, read_et_document, read_pytorch_et
from lumos.link import LinkedTrace, LinkReport, format_reports, link
from lumos.link.merge import merge_host_device

__all__ = ["register", "run"]

_NAMED_RANK = re.compile(r"(?:rank|worker)[-_]?(\d+)", re.IGNORECASE)
_LAST_INT = re.compile(r"(\d+)(?!.*\d)")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``link`` verb."""
    p = sub.add_parser(
        "link",
        help="link a PyTorch ET to its Kineto trace and report the match rate per rank",
        description="Join PyTorch Execution Trace ops to Kineto ops (by Record function id, "
        "External id, or op-name sequence alignment) and GPU kernels to their launching call "
        "and CPU op. ET and KINETO may be files or tar archives of per-rank traces.",
    )
    p.add_argument("et", metavar="ET", help="PyTorch Execution Trace file or archive")
    p.add_argument("kineto", metavar="KINETO", help="Kineto trace file or archive")
    p.add_argument("--json", action="store_true", help="print one JSON object per rank")
    p.add_argument("-o", "--out", default=None, metavar="DIR",
                   help="output directory: also write the merged host+device trace of each "
                   "rank there, DIR/host_device_<rank>.json (chakra_trace_link's output)")  # fmt: skip
    p.add_argument(
        "--min-rate",
        type=float,
        default=0.0,
        metavar="R",
        help="exit 1 if any rank links fewer than this share of ET ops (0..1)",
    )
    p.set_defaults(func=run, out_kind="dir")


def _name_rank(ref: TraceRef) -> int:
    name = PurePosixPath(ref.member or Path(ref.path).name).name
    m = _NAMED_RANK.search(name) or _LAST_INT.search(name.split(".")[0])
    return int(m.group(1)) if m else -1


def _rank(ref: TraceRef, recorded: int, many: bool) -> int:
    if recorded >= 0:
        return recorded
    return _name_rank(ref) if many else 0


def _load_ets(refs: list[TraceRef]) -> dict[int, HostTrace]:
    out: dict[int, HostTrace] = {}
    for ref in refs:
        trace = read_pytorch_et(ref.path, ref.member)
        rank = _rank(ref, int((trace.distributed_info or {}).get("rank", -1)), len(refs) > 1)
        if rank in out:
            raise InputError(ref.where, f"a second PyTorch ET for rank {rank}")
        out[rank] = trace
    return out


def _load_kinetos(refs: list[TraceRef]) -> dict[int, KinetoTrace]:
    out: dict[int, KinetoTrace] = {}
    for ref in refs:
        trace = read_kineto(ref.path, ref.member)
        rank = _rank(ref, trace.meta.rank, len(refs) > 1)
        if rank in out:
            raise InputError(ref.where, f"a second Kineto trace for rank {rank}")
        out[rank] = trace
    return out


def _refs(path: str, kind: str) -> list[TraceRef]:
    refs = [r for r in expand_paths([path]) if r.kind == kind]
    if not refs:
        what = "PyTorch Execution Trace" if kind == "pytorch_et" else "Kineto trace"
        raise InputError(path, f"holds no {what}")
    return refs


def run(args: argparse.Namespace) -> int:
    """Link every rank found in both inputs and print the reports."""
    ets = _load_ets(_refs(args.et, "pytorch_et"))
    kins = _load_kinetos(_refs(args.kineto, "kineto"))
    if len(ets) == 1 and len(kins) == 1:
        ranks = [next(iter(kins))]
        ets = {ranks[0]: next(iter(ets.values()))}
    else:
        ranks = sorted(set(ets) & set(kins))
        if not ranks:
            raise InputError(
                args.et,
                f"no rank in common with {args.kineto} (ET ranks {sorted(ets)}, "
                f"Kineto ranks {sorted(kins)})",
            )
    linked = {r: link(ets[r], kins[r]) for r in ranks}
    reports: list[LinkReport] = [linked[r].report for r in ranks]
    if args.out is not None:
        for line in _write_merged(Path(args.out), linked):
            print(line, file=sys.stderr if args.json else sys.stdout)  # --json: stdout stays JSON
    if args.json:
        for rep in reports:
            print(json.dumps(rep.to_dict()))
    else:
        print(format_reports(reports))
        missing = sorted(set(ets) ^ set(kins))
        if missing and len(ets) + len(kins) > 2:
            print(f"ranks present on one side only (not linked): {missing}")
    return 1 if any(rep.match_rate < args.min_rate for rep in reports) else 0


def _write_merged(out: Path, linked: Mapping[int, LinkedTrace]) -> list[str]:
    """Write ``out/host_device_<rank>.json`` for every rank; one line per file."""
    lines = []
    for rank, lt in linked.items():
        path, _, member = lt.host.path.partition("::")
        merged, summary = merge_host_device(lt, read_et_document(path, member or None))
        target = out / f"host_device_{rank}.json"
        with atomic_write(target) as f:
            json.dump(merged, f)
        gpu = ", ".join(f"{k} {v}" for k, v in summary.gpu_nodes.items()) or "none"
        lines.append(
            f"wrote {target}: {summary.host_nodes} ET nodes ({summary.timed_nodes} with Kineto "
            f"timing) + GPU nodes: {gpu}"
            + (f"; {summary.gpu_unattributed} GPU activities under no linked op left out"
               if summary.gpu_unattributed else "")
        )  # fmt: skip
    return lines
