"""The HTML report's estimate section: ``estimate.json`` rows as a table and a stacked bar chart.

==================  ==========================================================================
column              from the row
==================  ==========================================================================
scenario            ``config.label`` (the baseline first)
step ms, change     ``step_ns`` and its change against the baseline row
the four parts      ``breakdown`` (the slowest rank, per step), in ms
peak memory, fits   ``peak_memory_bytes`` and ``fits`` (only when the trace has memory events)
model, edits        ``model`` and the names of ``edits``
==================  ==========================================================================

Rows that are not estimate rows (a plain ``what_if`` list of objects) are shown as they are.
"""

from __future__ import annotations

from html import escape
from typing import Any

from lumos.report import svg
from lumos.report.labels import BREAKDOWN_LABELS

__all__ = ["estimate_section"]

PARTS = tuple(BREAKDOWN_LABELS.items())


def _is_estimate(rows: list[dict[str, Any]]) -> bool:
    return bool(rows) and all(
        isinstance(r.get("config"), dict)
        and "step_ns" in r
        and isinstance(r.get("breakdown"), dict)
        for r in rows
    )


def estimate_section(rows: list[dict[str, Any]], table: Any) -> str:
    """``<section>`` for the what-if rows; ``table(rows)`` renders a plain table."""
    if not _is_estimate(rows):
        return f"<section><h2>What-if estimates</h2>{table(rows)}</section>"
    base = float(rows[0]["step_ns"]) or 1.0
    flat = []
    for r in rows:
        label = str(r["config"].get("label", "?"))
        row: dict[str, Any] = {"scenario": label, "step_ns": r["step_ns"],
                               "change": f"{(float(r['step_ns']) / base - 1.0) * 100:+.1f} %"}  # fmt: skip
        for key, _ in PARTS:
            row[key] = r["breakdown"].get(key, 0)
        if any(x.get("peak_memory_bytes") is not None for x in rows):
            row["peak_memory_bytes"] = r.get("peak_memory_bytes")
            row["fits"] = {True: "yes", False: "NO: does not fit", None: "?"}[r.get("fits")]
        row["model"] = r.get("model", "")
        row["edits"] = "; ".join(str(e.get("edit", "")) for e in r.get("edits") or [])
        flat.append(row)
    chart = svg.stacked_hbar(
        [(str(f["scenario"])[:28], [f[k] / 1e6 for k, _ in PARTS]) for f in flat],
        [name for _, name in PARTS],
        unit="ms",
        fmt="{:,.3f}",
        title="Where the time goes, per scenario",
        x_label="ms (slowest rank, per step)",
    )
    note = ('<p class="sub">Predicted by <code>lumos estimate</code>; the baseline row is the '
            "replay of the recording. One row per scenario for the whole job: its step is the "
            "slowest rank's, per step.</p>")  # fmt: skip
    return f"<section><h2>What-if estimates</h2>{note}{table(flat)}{chart}</section>"


def estimate_title(doc: dict[str, Any]) -> str:
    """A heading for an estimate-only report."""
    src = ", ".join(str(s) for s in doc.get("sources") or [])[:120]
    return escape(f"lumos estimate: {src}" if src else "lumos estimate")
