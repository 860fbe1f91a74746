"""A :class:`~lumos.synth.fidelity.Fidelity` as a terminal table, CSV, JSON and an HTML page.

:func:`write_fidelity` writes ``fidelity.json`` (:meth:`Fidelity.to_json` plus the inputs and
the names of the other files), ``fidelity.csv`` (one line per row: ``metric, source,
candidate, delta, delta_kind, bound, ok``; empty where None) and ``fidelity.html`` (the table
and a bar chart of the op-class mix, source beside candidate) atomically as a set.

Values are shown in the unit their name says: ``*_ns`` in ms, ``*.share`` in %, the rest as
numbers; a share's delta in points (``pts``), any other delta in % of the source.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

from lumos._io import atomic_outputs, atomic_write
from lumos.report.html import html_page, html_table
from lumos.report.svg import grouped_hbar
from lumos.synth.fidelity import Fidelity, Row, is_share

__all__ = ["FILES", "fidelity_csv", "format_fidelity", "render_fidelity", "write_fidelity"]

#: What :func:`write_fidelity` writes into its directory.
FILES = {"json": "fidelity.json", "csv": "fidelity.csv", "html": "fidelity.html"}
_CSV_COLUMNS = ("metric", "source", "candidate", "delta", "delta_kind", "bound", "ok")


def _value(metric: str, v: float | None) -> str:
    if v is None:
        return "-"
    if metric.endswith("_ns"):
        return f"{v / 1e6:,.3f} ms"
    if is_share(metric):
        return f"{v * 100:.2f}%"
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:,.2f}"


def _delta(metric: str, d: float | None) -> str:
    if d is None:
        return "-"
    return f"{d * 100:+.2f} pts" if is_share(metric) else f"{d * 100:+.2f}%"


def _bound(metric: str, b: float | None) -> str:
    if b is None:
        return ""
    return f"{b * 100:g} pts" if is_share(metric) else f"{b * 100:g}%"


def _verdict(r: Row) -> str:
    return "info" if r.bound is None else "ok" if r.ok else "MISS"


def _cells(r: Row) -> dict[str, str]:
    return {
        "metric": r.metric,
        "source": _value(r.metric, r.source),
        "candidate": _value(r.metric, r.candidate),
        "delta": _delta(r.metric, r.delta),
        "bound": _bound(r.metric, r.bound),
        "": _verdict(r),
    }


def _summary(fid: Fidelity) -> str:
    bounded = [r for r in fid.rows if r.bound is not None]
    missed = fid.failures()
    if not missed:
        return f"fidelity: all {len(bounded)} bounds met"
    return (f"fidelity: {len(missed)} of {len(bounded)} bounds missed: "
            + ", ".join(r.metric for r in missed))  # fmt: skip


def format_fidelity(fid: Fidelity) -> str:
    """The rows as an aligned plain-text table, then one line saying which bounds were
    missed."""
    s, c = fid.source, fid.candidate
    lines = [
        f"source: {s.get('ranks', 0)} rank(s), {s.get('rank_steps', 0)} rank-step(s); "
        f"candidate: {c.get('ranks', 0)} rank(s), {c.get('rank_steps', 0)} rank-step(s)"
    ]
    cells = [_cells(r) for r in fid.rows]
    cols = ("metric", "source", "candidate", "delta", "bound", "")
    width = {k: max(len(k), *(len(x[k]) for x in cells)) for k in cols}
    left = {"metric", ""}

    def line(x: dict[str, str]) -> str:
        return "  ".join(x[k].ljust(width[k]) if k in left else x[k].rjust(width[k])
                         for k in cols).rstrip()  # fmt: skip

    lines.append(line({k: k for k in cols}))
    lines.extend(line(x) for x in cells)
    lines.append(_summary(fid))
    return "\n".join(lines)


def fidelity_csv(fid: Fidelity) -> str:
    """The rows as CSV (numbers unrounded, None as an empty field)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(_CSV_COLUMNS)
    for row in fid.to_json()["rows"]:
        w.writerow(["" if row[k] is None else repr(row[k]) if isinstance(row[k], float)
                    else str(row[k]).lower() if isinstance(row[k], bool) else row[k]
                    for k in _CSV_COLUMNS])  # fmt: skip
    return buf.getvalue()


def _class_mix(fid: Fidelity) -> str:
    """Bars of tasks per step per op class (``marker`` left out), source beside candidate."""
    rows = [r for r in fid.rows
            if r.metric.startswith("class.") and r.metric != "class.marker.per_step"]  # fmt: skip
    if not rows:
        return ""
    names = [r.metric.removeprefix("class.").removesuffix(".per_step") for r in rows]
    groups = [
        ("source", [r.source or 0.0 for r in rows]),
        ("candidate", [r.candidate or 0.0 for r in rows]),
    ]
    return grouped_hbar(
        names,
        groups,
        title="op-class mix",
        x_label="tasks per rank-step",
        unit="tasks",
        fmt="{:,.1f}",
    )


def render_fidelity(fid: Fidelity, inputs: Sequence[str] = ()) -> str:
    """The HTML page: a verdict, the inputs, the class-mix chart and the table."""
    verdict = escape(_summary(fid))
    ins = "".join(f"<li>{escape(label)}: {escape(str(path))}</li>"
                  for label, path in zip(("source", "candidate"), inputs, strict=False))  # fmt: skip
    sections = [
        f"<section><p>{verdict}</p>" + (f"<ul>{ins}</ul>" if ins else "") + "</section>",
        f"<section><h2>Op-class mix</h2>{_class_mix(fid)}</section>",
        "<section><h2>Metrics</h2>"
        + html_table([_cells(r) for r in fid.rows], "fidelity")
        + '<p class="note">Counts are per rank-step (one rank\'s one step), times means over '
        "rank-steps; a share's delta is in points, any other delta in % of the source. Rows "
        "without a bound are information.</p></section>",
    ]
    return html_page("lumos fidelity report", sections)


def write_fidelity(
    fid: Fidelity, out_dir: str | os.PathLike[str], inputs: Sequence[str] = ()
) -> dict[str, Path]:
    """Write :data:`FILES` into ``out_dir`` atomically as a set (``fidelity.json`` last);
    ``inputs`` are the source's and the candidate's paths, recorded in the JSON and page."""
    out = Path(out_dir)
    doc: dict[str, Any] = {
        **fid.to_json(),
        "inputs": dict(zip(("source", "candidate"), map(str, inputs), strict=False)),
        "files": {k: v for k, v in FILES.items() if k != "json"},
    }
    with atomic_outputs(out, FILES["json"]) as tmp:
        with atomic_write(tmp / FILES["csv"]) as f:
            f.write(fidelity_csv(fid))
        with atomic_write(tmp / FILES["html"]) as f:
            f.write(render_fidelity(fid, inputs))
        with atomic_write(tmp / FILES["json"]) as f:
            json.dump(doc, f, indent=1, sort_keys=True, allow_nan=False)
            f.write("\n")
    return {k: out / v for k, v in FILES.items()}
