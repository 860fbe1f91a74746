"""The link report: per rank, how many ET ops found their Kineto event, how, and what did not."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["LinkReport", "ThreadPair", "format_reports"]


@dataclass(frozen=True, slots=True)
class ThreadPair:
    """One ET thread aligned to one Kineto thread by sequence."""

    et_tid: int
    kineto_thread: str
    num_et_ops: int
    num_linked: int


@dataclass(frozen=True, slots=True)
class LinkReport:
    """Outcome of :func:`lumos.link.link` for one rank.

    ``unmatched_et`` lists ``(node_id, name)`` of every ET op left without a Kineto event;
    ``unmatched_kineto`` lists ``(ts_ns, name)`` of Kineto ops inside the linked time span that no
    ET node claimed (ops of other iterations are outside the span and not listed).
    """

    et_path: str
    kineto_path: str
    rank: int
    num_et_ops: int
    num_linked: int
    method_counts: dict[str, int]
    id_join: str  # "rf_id", "external_id", "<key> (rejected)" or "none"
    thread_pairs: tuple[ThreadPair, ...]
    unmatched_et: tuple[tuple[int, str], ...]
    num_kineto_ops_in_span: int
    unmatched_kineto: tuple[tuple[int, str], ...]
    num_gpu_activities: int
    num_gpu_with_launch: int
    num_gpu_with_op: int
    num_gpu_with_node: int

    @property
    def match_rate(self) -> float:
        """Linked ET ops / ET ops (1.0 for an ET with no ops)."""
        return self.num_linked / self.num_et_ops if self.num_et_ops else 1.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (lists instead of tuples), with ``match_rate`` added."""
        d = asdict(self)
        d["match_rate"] = round(self.match_rate, 6)
        d["thread_pairs"] = [asdict(p) for p in self.thread_pairs]
        d["unmatched_et"] = [{"node_id": i, "name": n} for i, n in self.unmatched_et]
        d["unmatched_kineto"] = [{"ts_ns": t, "name": n} for t, n in self.unmatched_kineto]
        return d


def format_reports(reports: list[LinkReport], max_listed: int = 10) -> str:
    """Human-readable text: one block per rank, then a one-line total."""
    lines: list[str] = []
    for r in reports:
        methods = ", ".join(f"{k} {v}" for k, v in r.method_counts.items() if v)
        lines.append(
            f"rank {r.rank if r.rank >= 0 else '?'}: linked {r.num_linked}/{r.num_et_ops} ET ops "
            f"({100 * r.match_rate:.1f} %) [{methods or 'none'}; id join: {r.id_join}]"
        )
        lines.append(f"  ET:     {r.et_path}")
        lines.append(f"  Kineto: {r.kineto_path}")
        for p in r.thread_pairs:
            lines.append(
                f"  ET tid {p.et_tid} <-> {p.kineto_thread}: {p.num_linked}/{p.num_et_ops}"
            )
        lines.append(
            f"  GPU activities {r.num_gpu_activities}: {r.num_gpu_with_launch} with launch call, "
            f"{r.num_gpu_with_op} inside a CPU op, {r.num_gpu_with_node} attributed to an ET node"
        )
        if r.unmatched_et:
            shown = ", ".join(f"{n} (id {i})" for i, n in r.unmatched_et[:max_listed])
            more = len(r.unmatched_et) - max_listed
            lines.append(
                f"  unmatched ET ops: {shown}" + (f", ... {more} more" if more > 0 else "")
            )
        if r.unmatched_kineto:
            lines.append(
                f"  Kineto ops in the linked span without an ET node: "
                f"{len(r.unmatched_kineto)} of {r.num_kineto_ops_in_span}"
            )
    if len(reports) > 1:
        total = sum(r.num_linked for r in reports)
        ops = sum(r.num_et_ops for r in reports)
        worst = min(reports, key=lambda r: r.match_rate)
        lines.append(
            f"total: {total}/{ops} ET ops linked ({100 * total / max(ops, 1):.1f} %), "
            f"lowest rank {worst.rank} at {100 * worst.match_rate:.1f} %"
        )
    return "\n".join(lines)
