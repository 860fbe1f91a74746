"""Two runs side by side: per step, per kernel class, per kernel and per op, largest change first.

A *side* is the analysis tables of one run (:func:`lumos.report.analysis_ranks.analyze`) and the
view to read from them: ``measured`` for a recording, ``predicted`` for a replay or what-if.
Kernels, kernel classes and ops are summed over ranks (the job's total GPU time in them); steps
are compared per rank.

==================  ===========================  ============================================
table               key                          compared
==================  ===========================  ============================================
``steps``           rank, step                   step duration
``kernel_classes``  class (gemm, comm, ...)      GPU time (``total_ns`` of the kernels table)
``kernels``         kernel name                  GPU time, and count
``ops``             op                           GPU time the op launched, and calls
==================  ===========================  ============================================

Every table has ``a_ns``, ``b_ns``, ``delta_ns`` (b - a) and ``change`` (delta / a; empty when
a is 0), rows ordered by ``|delta_ns|``, largest first (then by key); kernels add ``a_count`` and
``b_count``, ops ``a_calls`` and ``b_calls`` (the side first, as in ``a_ns``).

>>> from lumos.report.table import Table
>>> k = ("view", "rank", "kernel", "class", "count", "total_ns")
>>> a = {"kernels": Table("kernels", k, [("measured", 0, "gemm1", "gemm", 2, 100),
...                                      ("measured", 0, "add", "elementwise", 1, 10)])}
>>> b = {"kernels": Table("kernels", k, [("predicted", 0, "gemm1", "gemm", 2, 50),
...                                      ("predicted", 0, "add", "elementwise", 1, 10)])}
>>> diff_runs(a, "measured", b, "predicted")["kernel_classes"].rows[0]
('gemm', 100, 50, -50, -0.5)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from lumos.report.table import Table

__all__ = ["DIFF_TABLES", "diff_runs", "side_view"]

#: The tables :func:`diff_runs` returns, in order.
DIFF_TABLES = ("steps", "kernel_classes", "kernels", "ops")


def side_view(tables: Mapping[str, Table]) -> str:
    """``predicted`` when the tables hold a simulated run, else ``measured``."""
    views = set(tables["kernels"].column("view")) | set(tables["steps"].column("view"))
    return "predicted" if "predicted" in views else "measured"


def _sum(
    t: Table | None, view: str, key: Callable[[dict[str, Any]], tuple[Any, ...]], *cols: str
) -> dict[tuple[Any, ...], list[int]]:
    out: dict[tuple[Any, ...], list[int]] = {}
    for r in t.to_dicts() if t is not None else []:
        if r["view"] != view:
            continue
        acc = out.setdefault(key(r), [0] * len(cols))
        for i, c in enumerate(cols):
            acc[i] += int(r[c])
    return out


def _compare(
    name: str,
    keys: tuple[str, ...],
    a: dict[tuple[Any, ...], list[int]],
    b: dict[tuple[Any, ...], list[int]],
    extra: tuple[str, ...] = (),
) -> Table:
    rows = []
    zero = [0] * (1 + len(extra))
    for k in set(a) | set(b):
        va, vb = a.get(k, zero), b.get(k, zero)
        d = vb[0] - va[0]
        more = [x for i in range(len(extra)) for x in (va[1 + i], vb[1 + i])]
        rows.append((*k, va[0], vb[0], d, d / va[0] if va[0] else None, *more))
    n = len(keys)
    rows.sort(key=lambda r: (-abs(r[n + 2]), tuple(str(x) for x in r[:n])))
    cols = (*keys, "a_ns", "b_ns", "delta_ns", "change",
            *(f"{s}_{e}" for e in extra for s in ("a", "b")))  # fmt: skip
    return Table(name, cols, rows)


def diff_runs(
    a: Mapping[str, Table], view_a: str, b: Mapping[str, Table], view_b: str
) -> dict[str, Table]:
    """Every table of :data:`DIFF_TABLES` (see the module docstring) comparing run ``a``'s
    view ``view_a`` with run ``b``'s view ``view_b``."""
    out = {
        "steps": _compare(
            "steps", ("rank", "step"),
            _sum(a.get("steps"), view_a, lambda r: (r["rank"], r["step"]), "dur_ns"),
            _sum(b.get("steps"), view_b, lambda r: (r["rank"], r["step"]), "dur_ns"),
        ),
        "kernel_classes": _compare(
            "kernel_classes", ("class",),
            _sum(a.get("kernels"), view_a, lambda r: (r["class"],), "total_ns"),
            _sum(b.get("kernels"), view_b, lambda r: (r["class"],), "total_ns"),
        ),
        "kernels": _compare(
            "kernels", ("kernel", "class"),
            _sum(a.get("kernels"), view_a, lambda r: (r["kernel"], r["class"]), "total_ns",
                 "count"),
            _sum(b.get("kernels"), view_b, lambda r: (r["kernel"], r["class"]), "total_ns",
                 "count"),
            ("count",),
        ),
        "ops": _compare(
            "ops", ("op",),
            _sum(a.get("ops"), view_a, lambda r: (r["op"],), "gpu_ns", "calls"),
            _sum(b.get("ops"), view_b, lambda r: (r["op"],), "gpu_ns", "calls"),
            ("calls",),
        ),
    }  # fmt: skip
    return out
