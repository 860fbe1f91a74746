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
            if table.is_file():
                _attach_top_rows(result, key, _top_rows(table))
    out = args.out or src.with_name("report.html")
    if "perfetto" in result:  # links relative to the replay folder, made relative to the page
        result["perfetto"] = _relocate(result["perfetto"], src.parent, Path(out).parent)
    if isinstance(result.get("sources"), list):  # as given to replay: found from here, absolute
        result["sources"] = [_absolute(x) for x in result["sources"]]
    write_report(result, out, title=args.title)
    print(f"lumos: wrote {out}")
    if args.figures is not None:
        formats = ("svg", "png") if args.png else ("svg",)
        paths = write_figures(result, args.figures, formats)
        print(f"lumos: wrote {len(paths)} figure file(s) to {args.figures}")
    return 0


#: Rows of an analysis table the report shows (the CSV beside it has them all).
TOP_ROWS = 15


def _attach_top_rows(result: dict[str, Any], key: str, by_rank: dict[str, list[Any]]) -> None:
    """Each rank's top rows into that rank's part of ``result`` (``ranks[]`` of a multi-rank
    replay, the replay itself for one rank), where it has none yet: the report shows them in
    the rank's sections, which the rank selector switches."""
    ranks = result.get("ranks")
    parts = ranks if isinstance(ranks, list) and len(ranks) > 1 else [result]
    for part in parts:
        if not isinstance(part, dict) or part.get(key):
            continue
        rows = by_rank.get(str(part.get("rank")))
        if rows is None and len(parts) == 1 and len(by_rank) == 1:
            rows = next(iter(by_rank.values()))  # one rank, whatever it is numbered
        if rows:
            part[key] = rows


def _top_rows(path: Path) -> dict[str, list[dict[str, Any]]]:
    """Per rank (as the file writes it): the first :data:`TOP_ROWS` rows of ``lumos replay
    --analysis``'s ``kernels.csv`` or ``ops.csv`` (sorted by time) for the recording (``view``
    measured), numbers as numbers; empty when the file has none."""
    import csv

    from lumos.errors import InputError

    try:
        with path.open(newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(path, f"not a readable CSV: {exc}") from None
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if r.get("view") != "measured":
            continue
        top = out.setdefault(str(r.get("rank")), [])
        if len(top) < TOP_ROWS:
            top.append({k: _number(v) for k, v in r.items() if k not in ("view", "rank")})
    return out


def _number(v: str) -> Any:
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return v


def _relocate(value: Any, base: Path, page_dir: Path) -> Any:
    """``replay.json``'s ``perfetto`` (a name, a list, or label -> name) with every relative
    path (relative to ``base``, the replay folder) rewritten relative to ``page_dir``, where the
    HTML is written, so the links work wherever ``-o`` puts it."""
    import os

    def move(p: Any) -> Any:
        if not isinstance(p, str) or Path(p).is_absolute():
            return p
        return Path(os.path.relpath(base.resolve() / p, page_dir.resolve())).as_posix()

    if isinstance(value, dict):
        return {k: move(v) for k, v in value.items()}
    if isinstance(value, list):
        return [move(v) for v in value]
    return move(value)


def _absolute(source: Any) -> Any:
    """A measured trace's path as ``lumos replay`` was given it, absolute when it is relative
    and found from the current folder (the page may be written anywhere); else as it was."""
    if not isinstance(source, str):
        return source
    path, sep, member = source.partition("::")
    p = Path(path)
    if p.is_absolute() or not p.exists():
        return source
    return str(p.resolve()) + sep + member


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
