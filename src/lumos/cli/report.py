"""``lumos report REPLAY_JSON [-o report.html] [--figures DIR] [--png]``.

Writes a self-contained HTML report (works offline) of a replay result, and optionally its
figures as SVG (and PNG with ``lumos[plot]``) for papers and slides.
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path
from typing import Any

from lumos.errors import ConfigError, MissingDependencyError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "report",
        help="HTML report (and SVG/PNG figures) of a replay result",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    p.add_argument("replay", type=Path,
                   help="replay.json, or a directory holding it and/or estimate.json "
                   "(what-if rows are shown as a table and a chart)")  # fmt: skip
    p.add_argument("-o", "--out", type=Path, metavar="FILE",
                   help="output file: the HTML report (default: report.html beside REPLAY)")  # fmt: skip
    p.add_argument("--figures", type=Path, metavar="DIR", help="also write figures here")
    p.add_argument("--png", action="store_true", help="figures as PNG too (needs lumos[plot])")
    p.add_argument("--title", help="report title")
    p.add_argument("--estimate", type=Path, metavar="PATH",
                   help="what-ifs from lumos estimate (its estimate.json or folder), wherever "
                   "it was written (default: estimate.json beside REPLAY)")  # fmt: skip
    p.add_argument("--advice", type=Path, metavar="PATH",
                   help="verdict from lumos advise (its advice.json or folder); the report "
                   "opens with it (default: advice.json beside REPLAY)")  # fmt: skip
    p.set_defaults(func=run, out_kind="file")


def run(args: argparse.Namespace) -> int:
    from lumos.report.figures import write_figures
    from lumos.report.html import read_replay, write_report

    if args.png:  # checked before anything is written
        if args.figures is None:
            raise ConfigError("--png writes figures: give --figures DIR")
        if importlib.util.find_spec("matplotlib") is None:
            raise MissingDependencyError("matplotlib", "plot", "--png")
    src = args.replay / "replay.json" if args.replay.is_dir() else args.replay
    estimate = _given(args.estimate, "estimate.json") or src.with_name("estimate.json")
    advice = _given(args.advice, "advice.json") or src.with_name("advice.json")
    if not src.exists() and estimate.is_file():  # a directory `lumos estimate` wrote
        result, src = _from_estimate(estimate), estimate
    else:
        result = read_replay(src)
        if estimate.is_file() and not result.get("what_if"):
            result["what_if"] = _read_json(estimate).get("rows", [])
        if advice.is_file():  # `lumos advise -o` into the replay folder: the report opens with it
            result["advice"] = _read_advice(advice)
        for key, name in (("top_kernels", "kernels.csv"), ("top_ops", "ops.csv")):
            table = src.parent / "analysis" / name
            if table.is_file() and not result.get(key):
                result[key] = _top_rows(table)
    out = args.out or src.with_name("report.html")
    write_report(result, out, title=args.title)
    print(f"lumos: wrote {out}")
    if args.figures is not None:
        formats = ("svg", "png") if args.png else ("svg",)
        paths = write_figures(result, args.figures, formats)
        print(f"lumos: wrote {len(paths)} figure file(s) to {args.figures}")
    return 0


#: Rows of an analysis table the report shows (the CSV beside it has them all).
TOP_ROWS = 15


def _top_rows(path: Path) -> list[dict[str, Any]]:
    """The first :data:`TOP_ROWS` rows of ``lumos replay --analysis``'s ``kernels.csv`` or
    ``ops.csv`` (sorted by time) for the recording (``view`` measured) of its first rank,
    numbers as numbers; empty when the file has none."""
    import csv

    from lumos.errors import InputError

    try:
        with path.open(newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(path, f"not a readable CSV: {exc}") from None
    rows = [r for r in rows if r.get("view") == "measured"]
    if not rows:
        return []
    first = rows[0].get("rank")
    out = []
    for r in rows:
        if r.get("rank") != first:
            continue
        out.append({k: _number(v) for k, v in r.items() if k not in ("view", "rank")})
        if len(out) == TOP_ROWS:
            break
    return out


def _number(v: str) -> Any:
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return v


def _given(path: Path | None, name: str) -> Path | None:
    """``path`` (a file, or a folder holding ``name``), checked to exist; None when not given."""
    if path is None:
        return None
    from lumos.errors import InputError

    found = path / name if path.is_dir() else path
    if not found.is_file():
        raise InputError(found, f"no such file (expected {name} or the folder holding it)")
    return found


def _load(path: Path) -> Any:
    import json

    from lumos.errors import InputError

    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(path, f"not readable JSON: {exc}") from None


def _read_advice(path: Path) -> dict[str, Any]:
    from lumos.errors import InputError

    doc = _load(path)
    if not isinstance(doc, dict) or doc.get("format") != "lumos.advice":
        raise InputError(path, "not an advice.json of lumos advise (format lumos.advice)")
    return doc


def _read_json(path: Path) -> dict[str, Any]:
    from lumos.errors import InputError

    doc = _load(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list) or not doc["rows"]:
        raise InputError(path, "an estimate.json needs a non-empty 'rows' list")
    return doc


def _from_estimate(path: Path) -> dict[str, Any]:
    """A report input from ``estimate.json`` alone: the baseline row as the one step."""
    from lumos.report.html import validate_replay

    doc = _read_json(path)
    base = doc["rows"][0]
    measured = int(base.get("measured_step_ns", base["step_ns"]))
    result = {
        "title": "lumos estimate",
        "steps": [{"name": "baseline step (mean)", "measured_ns": measured,
                   "predicted_ns": int(base["step_ns"])}],
        "what_if": doc["rows"],
    }  # fmt: skip
    validate_replay(result, str(path))
    return result
