"""A self-contained HTML report of a replay or estimate (offline: inline SVG, CSS and JS).

Input is a replay result as ``lumos replay`` writes it (``replay.json``); only ``steps`` is
required, every other section is drawn when present::

    steps          [{name, measured_ns, predicted_ns, error?}, ...]              (required)
    breakdown      {measured: {exposed_compute_ns, overlapped_ns, exposed_comm_ns, other_ns},
                    predicted: {...}}
    sm_util        {bin_ns, measured: [0..1, ...], predicted: [0..1, ...]}
    critical_path  {kind: share 0..1, ...}  (or {"share": {...}})
    top_kernels    [{name, ...numbers}, ...]      top_ops   [{name, ...}, ...]
    what_if        [{scenario, ...}, ...]   (or {"rows": [...]})
    perfetto       {label: path, ...}  (or [path, ...]); relative to the report
    sources        [path, ...]: the measured traces (linked too)
    run            {key: value}: facts about the run shown in a table (e.g. the manifest)

Step error shown is always recomputed as (predicted - measured) / measured. Columns named
``*_ns`` are shown in ms. :func:`read_replay` checks the shape and raises one
:class:`~lumos.errors.InputError` naming the file; :func:`render_report` takes the dict.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from lumos._io import atomic_write, read_bytes
from lumos._version import __version__
from lumos.errors import InputError
from lumos.report.advice_section import advice_section
from lumos.report.estimate_section import estimate_section
from lumos.report.figures import BREAKDOWN_PARTS, build_figures, to_svg
from lumos.report.labels import BREAKDOWN_LABELS, column_label, kind_label

__all__ = ["html_page", "html_table", "read_replay", "render_report", "validate_replay",
           "write_report"]  # fmt: skip


def _num(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _breakdown_ok(bd: Any) -> bool:
    if not isinstance(bd, dict):
        return False
    sides = [bd[k] for k in ("measured", "predicted") if k in bd]
    return all(
        isinstance(side, dict) and all(_num(side.get(k, 0)) for k in BREAKDOWN_PARTS)
        for side in sides
    )


def _sm_util_ok(sm: Any) -> bool:
    if not isinstance(sm, dict) or not _num(sm.get("bin_ns", 1)) or float(sm.get("bin_ns", 1)) <= 0:
        return False
    series = [sm.get(k, []) for k in ("measured", "predicted")]
    return all(isinstance(v, list) and all(_num(x) for x in v) for v in series)


def validate_replay(data: Any, source: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """``data`` normalised for rendering, or :class:`InputError` naming ``source`` and the flaw."""
    if not isinstance(data, dict):
        raise InputError(source, "replay result must be a JSON object")
    steps = data.get("steps")
    if not isinstance(steps, list) or not steps:
        raise InputError(source, "replay result needs a non-empty 'steps' list")
    for i, s in enumerate(steps):
        if not isinstance(s, dict) or not all(
            _num(s.get(k)) for k in ("measured_ns", "predicted_ns")
        ):
            raise InputError(source, f"steps[{i}] needs numeric measured_ns and predicted_ns")
        if float(s["measured_ns"]) < 0 or float(s["predicted_ns"]) < 0:
            raise InputError(source, f"steps[{i}] has a negative time")
    out = dict(data)
    out["steps"] = [dict(s, name=str(s.get("name", f"step {i}"))) for i, s in enumerate(steps)]
    bd = data.get("breakdown")
    if bd is not None and not _breakdown_ok(bd):
        raise InputError(source, "'breakdown' must map measured/predicted to numeric *_ns parts")
    sm = data.get("sm_util")
    if sm is not None and not _sm_util_ok(sm):
        raise InputError(source, "'sm_util' must hold bin_ns and numeric measured/predicted lists")
    cp = data.get("critical_path")
    if cp is not None:
        if isinstance(cp, dict) and isinstance(cp.get("share"), dict):
            cp = cp["share"]
        if not isinstance(cp, dict) or not all(_num(v) for v in cp.values()):
            raise InputError(source, "'critical_path' must map task kinds to numeric shares")
        out["critical_path"] = cp
    wi = data.get("what_if")
    if isinstance(wi, dict):
        out["what_if"] = wi.get("rows", [])
    for key in ("top_kernels", "top_ops", "what_if"):
        rows = out.get(key)
        if rows is not None and not (
            isinstance(rows, list) and all(isinstance(r, dict) for r in rows)
        ):
            raise InputError(source, f"'{key}' must be a list of objects")
    return out


def read_replay(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Load and validate a ``replay.json`` (plain or gzip)."""
    raw = read_bytes(path)
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(path, f"not valid JSON: {exc}") from None
    return validate_replay(data, path)


def _cell(key: str, v: Any) -> str:
    if _num(v):
        if key.endswith("_ns"):
            return f"{float(v) / 1e6:,.3f}"
        if key.endswith("_bytes"):
            return f"{float(v) / (1 << 20):,.1f} MiB"
        if key in ("error", "share") or key.endswith(("_error", "_share", "_frac")):
            return (
                f"{100.0 * float(v):+.2f} %"
                if key.endswith("error")
                else f"{100.0 * float(v):.1f} %"
            )
        return f"{v:,}" if isinstance(v, int) else f"{v:,.4g}"
    if isinstance(v, dict | list):
        return escape(json.dumps(v, sort_keys=True))
    text = str(v)
    if key in _VERBATIM:  # a command people copy: whole, wrapping only between its words
        return f"<code>{escape(text)}</code>"
    short = short_name(text)
    if short != text:  # kernel names run to lines of template arguments: the full one on hover
        return f'<span title="{escape(text)}">{_breakable(short)}</span>'
    return _breakable(text)


#: Columns whose text is shown whole (never folded or cut).
_VERBATIM = frozenset({"reproduce", "command"})
_JOINS = re.compile(r"(::|[_/.,])(?=.)")


def _breakable(text: str) -> str:
    """``text`` escaped, a long one with line-break opportunities after ``::``, ``_``, ``/``,
    ``.`` and ``,`` (a kernel name wraps between its parts, never inside a word; what has no
    such place makes its table scroll sideways instead)."""
    out = escape(text)
    return _JOINS.sub(r"\1<wbr>", out) if len(text) > 24 else out


_ANGLE = re.compile(r"<[^<>()]*>")
_PAREN = re.compile(r"\([^()<>]*\)")


def short_name(name: str, limit: int = 72) -> str:
    """A long kernel or op name made readable: template arguments and parameter lists folded
    to ``<…>`` and ``(…)`` (innermost first), then cut at ``limit`` characters with ``…``;
    names within ``limit`` unchanged.

    >>> short_name("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
    ...            "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, "
    ...            "at::detail::Array<char*, 1>)")
    'void at::native::vectorized_elementwise_kernel<…>(…)'
    """
    if len(name) <= limit:
        return name
    out, prev = name, None
    while out != prev:  # innermost first, until nothing nested is left
        prev = out
        out = _ANGLE.sub("\x01", _PAREN.sub("\x02", out))
    out = out.replace("\x01", "<…>").replace("\x02", "(…)")
    return out if len(out) <= limit else out[: limit - 1] + "…"


#: Text that is a number with its unit ("+49.0 %", "12 ms"): shown as a number, on one line.
_NUMBER_TEXT = re.compile(r"[+\-\u2212]?[0-9][0-9,.]*(?:e[+-]?[0-9]+)?\s?(?:%|[A-Za-z]{1,3}|x)?")


def _numeric(v: Any) -> bool:
    return _num(v) or (isinstance(v, str) and _NUMBER_TEXT.fullmatch(v) is not None)


def _header(key: str) -> str:
    return escape(column_label(key))


def _table(rows: list[dict[str, Any]], cls: str = "", rank_link: str | None = None) -> str:
    """Rows as a sortable table; a column whose values are all numbers is right-aligned, header
    too. ``rank_link``: the column whose cells link to that rank's sections (``#rank=N``)."""
    cols: list[str] = []
    for r in rows:
        cols.extend(k for k in r if k not in cols)
    numeric = {c for c in cols if all(_numeric(r[c]) for r in rows if r.get(c, "") != "")}
    head = "".join(f"<th{' class=num' if c in numeric else ''}>{_header(c)}</th>" for c in cols)
    body = []
    for r in rows:
        tds = []
        for c in cols:
            v = r.get(c, "")
            num = ' class="num"' if _numeric(v) else ""
            text = _cell(c, v)
            if c == rank_link and v != "":
                text = f'<a href="#rank={escape(str(v))}">{text}</a>'
            tds.append(f"<td{num}>{text}</td>")
        body.append("<tr>" + "".join(tds) + "</tr>")
    # in a box that scrolls sideways: a narrow screen scrolls the table, never breaks a word
    return (f'<div class="tw"><table class="sortable {cls}"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>')  # fmt: skip


def _step_rows(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for s in steps:
        m, p = float(s["measured_ns"]), float(s["predicted_ns"])
        rows.append(
            {
                "step": s["name"],
                "measured_ns": s["measured_ns"],
                "predicted_ns": s["predicted_ns"],
                "error": (p - m) / m if m else 0.0,
            }
        )
        if s.get("measured_peak_memory_bytes") is not None:
            rows[-1]["measured_peak_memory_bytes"] = s["measured_peak_memory_bytes"]
            rows[-1]["predicted_peak_memory_bytes"] = s.get("predicted_peak_memory_bytes")
    return rows


def _summary(steps: list[dict[str, Any]]) -> str:
    rows = _step_rows(steps)
    errs = [abs(r["error"]) for r in rows]
    mean_m = sum(float(r["measured_ns"]) for r in rows) / len(rows) / 1e6
    mean_p = sum(float(r["predicted_ns"]) for r in rows) / len(rows) / 1e6
    cards = [
        ("steps", f"{len(rows)}"),
        ("measured step", f"{mean_m:,.2f} ms"),
        ("predicted step", f"{mean_p:,.2f} ms"),
        ("mean |error|", f"{100 * sum(errs) / len(errs):.2f} %"),
        ("max |error|", f"{100 * max(errs):.2f} %"),
    ]
    return '<div class="cards">' + "".join(
        f'<div class="card"><div class="v">{v}</div><div class="k">{k}</div></div>' for k, v in cards
    ) + "</div>"  # fmt: skip


def _comm_note(bd: dict[str, Any]) -> str:
    """Why measured and predicted exposed communication differ, when they differ by more than a
    tenth (the CLI prints the same): a recorded collective also holds its wait for the others."""
    meas = float((bd.get("measured") or {}).get("exposed_comm_ns", 0))
    pred = float((bd.get("predicted") or {}).get("exposed_comm_ns", 0))
    if abs(meas - pred) <= 0.1 * max(meas, pred, 1.0):
        return ""
    return ("<p class=note>Exposed communication differs between the recording and the replay: "
            "a recorded collective (an NCCL kernel, a gloo span) also holds its wait for the "
            "other ranks, while the replay starts a collective when the last rank arrives, so "
            "that wait shows as other (idle) time there.</p>")  # fmt: skip


def _trace_links(data: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, href) of the simulated traces (``perfetto``) then the measured ones (``sources``).

    A trace inside an archive (``archive.tar.gz::member``) names the archive, once, without a
    link (href ``""``): neither a browser nor Perfetto opens a path inside one.
    """
    perfetto = data.get("perfetto") or {}
    if isinstance(perfetto, str):
        perfetto = {perfetto: perfetto}
    items = (
        list(perfetto.items()) if isinstance(perfetto, Mapping) else [(str(p), p) for p in perfetto]
    )
    known = {str(path) for _, path in items}
    sources = data.get("sources") or []
    inside: dict[str, int] = {}
    files: list[str] = []
    for src in sources if isinstance(sources, list) else []:
        if str(src) in known:
            continue
        path, sep, _ = str(src).partition("::")
        if path not in inside:
            inside[path] = 0
            files.append(path)
        inside[path] += bool(sep)
    for path in files:
        href = Path(path).as_uri() if Path(path).is_absolute() else path
        label = f"measured: {Path(path).name}"
        if inside[path]:  # Perfetto cannot open an archive: named, not linked
            label += f" ({inside[path]} traces inside; extract one to open it in Perfetto)"
            href = ""
        items.append((label, href))
    return [(str(label), str(path)) for label, path in items]


def _links(items: list[tuple[str, str]]) -> str:
    lis = "".join(
        f'<li><a href="{escape(str(path))}">{escape(str(label))}</a></li>' if path
        else f"<li>{escape(str(label))}</li>"
        for label, path in items
    )  # fmt: skip
    return (
        f"<ul>{lis}</ul><p class=note>Open a file in "
        '<a href="https://ui.perfetto.dev">ui.perfetto.dev</a> ("Open trace file"): the '
        "replay's file holds, per rank, the recording (measured) just above the replay "
        "(predicted), its critical path marked on a track of its own.</p>"
    )


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0;color:#222;background:#f6f7f9}
main{max-width:960px;margin:0 auto;padding:18px 24px 48px}
h1{font-size:22px;margin:8px 0 2px}h2{font-size:17px;margin:28px 0 8px}
.sub{color:#666;font-size:13px}section{background:#fff;border:1px solid #e3e5e8;border-radius:8px;padding:12px 16px;margin:14px 0}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:14px 0}.card{background:#fff;border:1px solid #e3e5e8;border-radius:8px;padding:10px 14px;min-width:120px}
.card .v{font-size:20px;font-weight:600}.card .k{color:#666;font-size:12px}
svg.chart{width:100%;height:auto;display:block}[hidden]{display:none!important}
table{border-collapse:collapse;font-size:13px;width:100%}th,td{padding:4px 8px;border-bottom:1px solid #eee;text-align:left}
th{cursor:pointer;user-select:none;background:#fafafa}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.tw{overflow-x:auto;max-width:100%}
td.num,th.num,.card .v{white-space:nowrap}th{overflow-wrap:normal;word-break:normal;hyphens:manual}
nav.ranks{position:sticky;top:0;z-index:1;background:#f6f7f9;padding:8px 0;font-size:14px}nav.ranks select{font-size:14px}
.note{color:#666;font-size:12px}
"""

# Sortable tables; the rank selector (#rank=N in the address picks a rank, "all" shows every
# one); and what the Chromium test reads back from the DOM: script errors, the number of charts,
# where the plotting area of each visible chart is on the page, the page height, how many
# tables are wider than their card, how many scroll sideways in their box, and how many words
# of a visible table cell (or numbers with their unit) break across lines.
_JS = r"""
window.addEventListener('error',function(e){document.body.dataset.jsErrors=(document.body.dataset.jsErrors||'')+e.message+';'});
function lumosPick(r){var sel=document.getElementById('rank-select');if(!sel)return;
if(!Array.from(sel.options).some(function(o){return o.value===r}))r=sel.dataset.default;
sel.value=r;document.body.dataset.rank=r;
document.querySelectorAll('section[data-rank]').forEach(function(s){s.hidden=!(r==='all'||s.dataset.rank===r)});}
function lumosHash(){var m=/rank=([^&]+)/.exec(location.hash);return m?decodeURIComponent(m[1]):null}
document.addEventListener('DOMContentLoaded',function(){
var sel=document.getElementById('rank-select');if(sel){lumosPick(lumosHash()||sel.dataset.default);
sel.addEventListener('change',function(){location.hash='rank='+sel.value});
window.addEventListener('hashchange',function(){lumosPick(lumosHash()||sel.dataset.default)});}
document.querySelectorAll('table.sortable th').forEach(function(th,i){th.addEventListener('click',function(){
var tb=th.closest('table').tBodies[0],rows=Array.from(tb.rows),asc=th.dataset.asc!=='1';th.dataset.asc=asc?'1':'0';
var key=function(r){var t=r.cells[i]?r.cells[i].textContent:'';var n=parseFloat(t.replace(/[^0-9eE.+-]/g,''));return isNaN(n)?t:n};
rows.sort(function(a,b){var x=key(a),y=key(b);return (x>y?1:x<y?-1:0)*(asc?1:-1)});rows.forEach(function(r){tb.appendChild(r)})})});
document.body.dataset.charts=String(document.querySelectorAll('svg.chart').length);
var boxes=[];document.querySelectorAll('svg.chart').forEach(function(c){if(!c.getBoundingClientRect().width)return;
var a=c.querySelector('.plot-area');if(!a)return;var b=a.getBoundingClientRect();
boxes.push([b.left+scrollX,b.top+scrollY,b.width,b.height].map(Math.round).join(','))});
document.body.dataset.plots=boxes.join(';');document.body.dataset.height=String(document.documentElement.scrollHeight);
var wide=0,scrolls=0;document.querySelectorAll('section table').forEach(function(t){var s=t.closest('section'),b=t.closest('.tw')||t;
if(b.getBoundingClientRect().width>s.clientWidth+1)wide++;if(b!==t&&b.scrollWidth>b.clientWidth+1)scrolls++});
document.body.dataset.wide=String(wide);document.body.dataset.scrolls=String(scrolls);
var broken=0;document.querySelectorAll('section th, section td').forEach(function(c){if(!c.getBoundingClientRect().width)return;
var w=document.createTreeWalker(c,NodeFilter.SHOW_TEXT),t,all={};while((t=w.nextNode())){var re=/[A-Za-z0-9]+/g,m;while((m=re.exec(t.data))){
var r=document.createRange(),ys={};r.setStart(t,m.index);r.setEnd(t,m.index+m[0].length);
Array.from(r.getClientRects()).forEach(function(q){if(q.width>0){ys[Math.round(q.top)]=1;all[Math.round(q.top)]=1}});
if(Object.keys(ys).length>1)broken++}}if((c.classList.contains('num')||/^[+-]?[0-9][0-9,.]*\s?\S{0,3}$/.test(c.textContent.trim()))&&Object.keys(all).length>1)broken++});
document.body.dataset.broken=String(broken);});
"""


def _replay_sections(data: dict[str, Any], prefix: str, rank: Any = None) -> list[str]:
    """Per-step time, breakdown, SM utilization and critical path of one rank's replay (each
    section tagged ``data-rank`` when ``rank`` is given, for the rank selector)."""
    parts = []
    figs = {f.name: to_svg(f) for f in build_figures(data)}
    sec = "<section>" if rank is None else f'<section data-rank="{escape(str(rank))}">'
    parts.append(f"{sec}<h2>{escape(prefix)}Per-step time</h2>")
    if "step_time" in figs:
        parts.append(figs["step_time"])
    parts.append(_table(_step_rows(data.get("steps") or []), "steps") + "</section>")
    if "breakdown" in figs:
        bd = data["breakdown"]
        rows = [
            {"view": side, **{k: bd[side].get(k, 0) for k in BREAKDOWN_PARTS}}
            for side in ("measured", "predicted")
            if side in bd
        ]
        n = len(data.get("steps") or [])
        total = f"<p class=note>Totals over the {n} steps of the window.</p>" if n > 1 else ""
        parts.append(f"{sec}<h2>{escape(prefix)}Breakdown</h2>" + figs["breakdown"]
                     + _table(rows) + total + _comm_note(bd) + "</section>")  # fmt: skip
    if "sm_util" in figs:
        parts.append(
            f"{sec}<h2>{escape(prefix)}SM utilization (GPU streams busy)</h2>{figs['sm_util']}</section>"
        )
    if "memory" in figs:
        mem = data.get("memory") or {}
        note = (f'<p class="sub">Allocated bytes on {escape(str(mem.get("device")))}, the largest '
                "in each bin: the recording beside the replay (from <code>[memory]</code> events; "
                "the peak of each step is in the step table).</p>")  # fmt: skip
        parts.append(f"{sec}<h2>{escape(prefix)}Memory</h2>{note}{figs['memory']}</section>")
    if "critical_path" in figs:
        cp_rows = [{"kind": kind_label(k), "share": v}
                   for k, v in data["critical_path"].items() if v > 0]  # fmt: skip
        by_op = ""
        for what, key in (("ops", "op"), ("kernels", "kernel")):
            top = data.get(f"critical_path_{what}")
            if isinstance(top, list) and top and all(isinstance(o, dict) for o in top):
                # replay.json's keys are sorted: show the name first, as lumos replay does
                cols = (key, "tasks", "task_ns", "delay_ns", "share")
                top = [{**{c: o[c] for c in cols if c in o}, **o} for o in top]
                by_op += f"<h3>{escape(prefix)}Top {what} on the critical path</h3>" + _table(top)
        parts.append(f"{sec}<h2>{escape(prefix)}Critical path</h2>" + figs["critical_path"]
                     + _table(cp_rows) + by_op + "</section>")  # fmt: skip
    for key, label in (("top_kernels", "Top kernels"), ("top_ops", "Top ops")):
        if data.get(key):  # lumos replay --analysis: this rank's recording, by time
            parts.append(f"{sec}<h2>{escape(prefix)}{label} (measured)</h2>{_table(data[key])}"
                         "</section>")  # fmt: skip
    return parts


#: The words the report uses (the README's list and ``lumos replay``'s footnote say the same).
GLOSSARY: tuple[tuple[str, str], ...] = (
    (BREAKDOWN_LABELS["exposed_compute_ns"],
     "GPU time when compute kernels run and no communication does"),
    (BREAKDOWN_LABELS["exposed_comm_ns"], "GPU time when communication runs and no compute does"),
    (BREAKDOWN_LABELS["overlapped_ns"], "GPU time when compute and communication run at once"),
    (BREAKDOWN_LABELS["other_ns"], "time in the step window when the GPU runs nothing (waiting for the CPU, a "
     "peer or a synchronization)"),
    ("delay", "time on the critical path spent between tasks, not running one: CPU overhead "
     "between ops, launch latency, waiting for another task, thread or rank"),
    ("error", "(predicted - measured) / measured"),
)  # fmt: skip


#: The same words for a job with no GPU (every rank's ``sm_util`` device is -1): its compute
#: runs on the CPU, and "GPU time" would describe nothing it did.
GLOSSARY_CPU: tuple[tuple[str, str], ...] = (
    (BREAKDOWN_LABELS["exposed_compute_ns"],
     "time when the CPU computes (ops) and no communication runs"),
    (BREAKDOWN_LABELS["exposed_comm_ns"], "time when communication runs and no compute does"),
    (BREAKDOWN_LABELS["overlapped_ns"], "time when compute and communication run at once"),
    (BREAKDOWN_LABELS["other_ns"], "time in the step window when neither runs (framework "
     "overhead between ops, waiting for a peer)"),
    *GLOSSARY[4:],
)  # fmt: skip


def _cpu_only(data: dict[str, Any]) -> bool:
    """Whether the replay ran no GPU stream on any rank (``sm_util.device`` -1 everywhere)."""
    ranks = data["ranks"] if isinstance(data.get("ranks"), list) else [data]
    devices = [r.get("sm_util", {}).get("device") for r in ranks if isinstance(r, dict)]
    return bool(devices) and all(d == -1 for d in devices)


def _glossary(cpu_only: bool = False) -> str:
    words = GLOSSARY_CPU if cpu_only else GLOSSARY
    items = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in words)
    return f'<section><h2>Words</h2><dl class="glossary">{items}</dl></section>'


def _ranks_table(ranks: list[dict[str, Any]]) -> str:
    """One row per rank: steps, mean measured and predicted step, mean |error|; slowest first."""
    rows = []
    for r in ranks:
        steps = r.get("steps") or []
        meas = [s["measured_ns"] for s in steps]
        pred = [s["predicted_ns"] for s in steps]
        err = (r.get("error") or {}).get("mean_abs")
        rows.append({
            "rank": r.get("rank"),
            "steps": len(steps),
            "measured_ns": sum(meas) // len(meas) if meas else 0,
            "predicted_ns": sum(pred) // len(pred) if pred else 0,
            "error": err,
        })  # fmt: skip
    rows.sort(key=lambda x: -int(x["predicted_ns"] or 0))
    return ("<section><h2>Ranks (all ranks, slowest first)</h2>" + _table(rows, "ranks", rank_link="rank")
            + "</section>")  # fmt: skip


def _rank_selector(ranks: list[dict[str, Any]], slowest: Any) -> str:
    """A select that shows one rank's sections (or all); it starts on the slowest rank. Without
    scripts every rank's sections stay visible."""
    opts = ['<option value="all">all ranks</option>']
    for r in ranks:
        v = escape(str(r.get("rank", "?")))
        mark = " (slowest)" if r.get("rank") == slowest else ""
        opts.append(f'<option value="{v}">rank {v}{mark}</option>')
    return (f'<nav class="ranks"><label for="rank-select">Show </label><select id="rank-select" '
            f'data-default="{escape(str(slowest))}">{"".join(opts)}</select></nav>')  # fmt: skip


def _head(heading: str) -> list[str]:
    return [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width,initial-scale=1">',
        f"<title>{escape(heading)}</title><style>{_CSS}</style><script>{_JS}</script></head>",
        f"<body><main><h1>{escape(heading)}</h1>",
        f'<div class="sub">generated by lumos {escape(__version__)}</div>',
    ]


def html_page(heading: str, sections: Sequence[str]) -> str:
    """A self-contained page in the report's style (CSS, sortable tables): ``heading``, then
    ``sections`` (HTML fragments, e.g. ``<section>`` elements holding :func:`html_table` and
    :mod:`lumos.report.svg` charts) as they are."""
    return "\n".join([*_head(heading), *sections, "</main></body></html>\n"])


def html_table(rows: list[dict[str, Any]], cls: str = "") -> str:
    """A sortable table of ``rows`` (columns: every key, in first-seen order; numbers right
    aligned, ``*_ns`` columns in ms, strings escaped)."""
    return _table(rows, cls)


def render_report(result: dict[str, Any], *, title: str | None = None) -> str:
    """The whole report as one HTML string (``result`` as from :func:`validate_replay`)."""
    data = validate_replay(result)
    heading = title or str(data.get("title") or "lumos replay report")
    parts = _head(heading)
    if isinstance(result.get("advice"), dict):  # lumos advise wrote advice.json beside it
        parts.append(advice_section(result["advice"], _table))
    ranks: list[dict[str, Any]] = data["ranks"] if isinstance(data.get("ranks"), list) else []
    multi = len(ranks) > 1
    if multi:
        slowest = max(ranks, key=lambda r: sum(s["predicted_ns"] for s in r.get("steps") or []))
        parts.append(f'<div class="sub">{len(ranks)} ranks; the cards show the slowest, '
                     f"rank {escape(str(slowest.get('rank')))}; the sections below show the rank "
                     "the selector picks, each titled with it</div>")  # fmt: skip
        parts.append(_summary(slowest.get("steps") or []))
    else:
        if data.get("rank") is not None:
            parts.append(f'<div class="sub">rank {escape(str(data["rank"]))}: every section '
                         "shows this rank</div>")  # fmt: skip
        parts.append(_summary(data["steps"]))
    if multi:
        parts.append(_ranks_table(ranks))
        parts.append(_rank_selector(ranks, slowest.get("rank")))
        for r in ranks:
            own = r  # top tables given for the whole replay belong to the rank it names
            if r.get("rank") == data.get("rank"):
                own = {**{k: data[k] for k in ("top_kernels", "top_ops") if data.get(k)}, **r}
            parts.extend(_replay_sections(own, f"rank {r.get('rank', '?')}: ", r.get("rank", "?")))
    else:
        parts.extend(_replay_sections(data, ""))
    if data.get("what_if"):
        parts.append(estimate_section(data["what_if"], _table))
    links = _trace_links(data)
    if links:
        parts.append(f"<section><h2>Traces</h2>{_links(links)}</section>")
    if isinstance(data.get("run"), dict):
        rows = [{"key": k, "value": v} for k, v in data["run"].items()]
        parts.append(f"<section><h2>Run</h2>{_table(rows)}</section>")
    parts.append(_glossary(_cpu_only(data)))
    parts.append("</main></body></html>\n")
    return "\n".join(parts)


def write_report(
    result: dict[str, Any], path: str | os.PathLike[str], *, title: str | None = None
) -> Path:
    """Render ``result`` and write it atomically to ``path``; returns the path."""
    out = Path(path)
    html = render_report(result, title=title)
    with atomic_write(out) as f:
        f.write(html)
    return out
