"""Check a Chakra trace the way its consumers need it, and repair what can be repaired.

Errors (``validate`` exits 1): duplicate node ids, ``data_deps``/``ctrl_deps`` naming no node
(ASTRA-sim's feeder aborts on them), dependency cycles (including a node depending on itself),
communication nodes without the attributes a simulator needs (``comm_type``/``comm_size`` on
GPU-side COMM_COLL, ``comm_dst`` on COMM_SEND, ``comm_src`` on COMM_RECV), convention
attributes of an unusable kind (e.g. ``comm_type`` as a string) or of a value beyond int64
(``out_of_range_attr``), a negative ``comm_size``, invalid node types, and empty metadata (no
version and no attributes). Node types beyond -128..127 and times whose nanoseconds overflow
int64 never get here: :func:`~lumos.chakra.read_chakra` refuses them, naming the node.

Warnings: CPU-side collectives (``is_cpu_op`` true) without ``comm_type``, as the PyTorch
converter writes for ``c10d::*`` ops: they are host-side launches of a collective whose
GPU-side node carries the attributes.

:func:`fix_trace` drops dangling and self dependencies and says what it changed; duplicate ids
and longer cycles need a human decision and are left (and reported) as they are.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from lumos.chakra.deps import resolve_deps, topological_order
from lumos.chakra.schema import NodeType
from lumos.chakra.trace import MISSING, ChakraTrace

__all__ = ["Problem", "ValidationReport", "fix_trace", "validate_trace"]


@dataclass(frozen=True, slots=True)
class Problem:
    """One finding: ``kind`` (a stable key), the node id it concerns (or None) and detail."""

    kind: str
    node_id: int | None
    detail: str
    severity: str = "error"


@dataclass(frozen=True)
class ValidationReport:
    """All findings for one trace, errors and warnings, in node order."""

    path: str | None
    num_nodes: int
    problems: tuple[Problem, ...]

    @property
    def errors(self) -> tuple[Problem, ...]:
        """Findings that make the trace unusable for a simulator."""
        return tuple(p for p in self.problems if p.severity == "error")

    @property
    def warnings(self) -> tuple[Problem, ...]:
        """Findings worth knowing that tools handle."""
        return tuple(p for p in self.problems if p.severity == "warning")

    @property
    def ok(self) -> bool:
        """True when there are no errors."""
        return not self.errors

    def counts(self) -> dict[str, int]:
        """Number of findings per kind, sorted by kind."""
        return dict(sorted(Counter(p.kind for p in self.problems).items()))


def validate_trace(trace: ChakraTrace) -> ValidationReport:
    """Every problem of ``trace`` (see the module docstring for the list)."""
    probs: list[Problem] = []
    ids = trace.node_id
    md = trace.metadata
    if not md.version and not md.attrs:
        probs.append(
            Problem("empty_metadata", None, "GlobalMetadata has no version and no attributes")
        )
    g = resolve_deps(trace)
    for dup in g.duplicate_ids.tolist():
        rows = np.flatnonzero(ids == dup).tolist()
        probs.append(
            Problem("duplicate_id", int(dup), f"id held by {len(rows)} nodes (rows {rows[:5]})")
        )
    for kind, dang in (
        ("dangling_data_dep", g.dangling_data),
        ("dangling_ctrl_dep", g.dangling_ctrl),
    ):
        for row, missing in dang.tolist():
            probs.append(
                Problem(
                    kind,
                    int(ids[row]),
                    f"depends on id {missing & ((1 << 64) - 1)}, which no node has",
                )
            )
    owner = np.repeat(np.arange(trace.num_nodes), np.diff(g.pred_ptr))
    for row in np.unique(owner[g.pred_idx == owner]).tolist():
        probs.append(Problem("self_dep", int(ids[row]), "depends on itself"))
    _, blocked = topological_order(g)
    if blocked.size:
        on_self = set(np.unique(owner[g.pred_idx == owner]).tolist())
        rest = [r for r in blocked.tolist() if r not in on_self]
        if rest:
            shown = ", ".join(str(int(ids[r])) for r in rest[:10])
            probs.append(Problem("cycle", int(ids[rest[0]]),
                                 f"{len(rest)} nodes never become ready (cycle); ids {shown}"))  # fmt: skip
    probs.extend(_comm_problems(trace))
    bad_type = np.flatnonzero((trace.node_type < 1) | (trace.node_type > 7))
    for row in bad_type.tolist():
        probs.append(
            Problem("invalid_node_type", int(ids[row]), f"type {int(trace.node_type[row])}")
        )
    return ValidationReport(trace.path, trace.num_nodes, tuple(probs))


def _comm_problems(trace: ChakraTrace) -> list[Problem]:
    c = trace.comm
    ids = trace.node_id
    t = trace.node_type
    out = [
        Problem("ill_typed_attr", int(ids[row]), f"{name} stored as {kind}")
        for row, name, kind in c.ill_typed
    ]
    out += [
        Problem("out_of_range_attr", int(ids[row]), f"{name} = {value} does not fit int64")
        for row, name, value in c.out_of_range
    ]
    for row in np.flatnonzero((c.comm_size != MISSING) & (c.comm_size < 0)).tolist():
        out.append(
            Problem("invalid_comm_size", int(ids[row]), f"comm_size {int(c.comm_size[row])}")
        )
    coll = t == NodeType.COMM_COLL_NODE
    cpu = c.is_cpu_op == 1
    for row in np.flatnonzero(coll & (c.comm_type == MISSING) & cpu).tolist():
        out.append(Problem("cpu_collective_without_comm_type", int(ids[row]),
                           f"{trace.name_of(row)!r} (host-side launch)", "warning"))  # fmt: skip
    checks = (
        ("missing_comm_type", coll & ~cpu, c.comm_type),
        ("missing_comm_size", coll & ~cpu, c.comm_size),
        ("missing_comm_dst", t == NodeType.COMM_SEND_NODE, c.comm_dst),
        ("missing_comm_src", t == NodeType.COMM_RECV_NODE, c.comm_src),
    )
    for kind, mask, col in checks:
        for row in np.flatnonzero(mask & (col == MISSING)).tolist():
            out.append(Problem(kind, int(ids[row]), f"{trace.name_of(row)!r} has no {kind[8:]}"))
    bad_kind = coll & (c.comm_type != MISSING) & ((c.comm_type < 0) | (c.comm_type > 9))
    for row in np.flatnonzero(bad_kind).tolist():
        out.append(
            Problem("invalid_comm_type", int(ids[row]), f"comm_type {int(c.comm_type[row])}")
        )
    return out


def fix_trace(trace: ChakraTrace) -> tuple[ChakraTrace, list[str]]:
    """A copy of ``trace`` without dangling or self dependencies, and what changed (one line
    per kind). Everything else, attributes included, is kept byte for byte."""
    changes: list[str] = []
    new = []
    for label, ptr, deps in (("data_deps", trace.data_ptr, trace.data_deps),
                             ("ctrl_deps", trace.ctrl_ptr, trace.ctrl_deps)):  # fmt: skip
        owner = np.repeat(np.arange(trace.num_nodes), np.diff(ptr))
        rows = trace.index_of(deps)
        dangling = rows < 0
        self_dep = deps == trace.node_id[owner]
        keep = ~(dangling | self_dep)
        for what, mask in (("dangling", dangling), ("self", self_dep & ~dangling)):
            if mask.any():
                nodes = np.unique(owner[mask]).size
                changes.append(f"dropped {int(mask.sum())} {what} {label} from {nodes} nodes")
        new_ptr = np.zeros_like(ptr)
        np.cumsum(np.bincount(owner[keep], minlength=trace.num_nodes), out=new_ptr[1:])
        new.append((new_ptr, deps[keep]))
    if not changes:
        return trace, []
    (dp, dd), (cp, cd) = new
    return trace.with_deps(cp, cd, dp, dd), changes
