"""Rewrite the README's speed table from the JSON that ``benchmarks/run.py`` wrote.

    .venv/bin/python benchmarks/readme_table.py [--json benchmarks/results.json] [--readme README.md]

The table sits between the ``<!-- speed-table:start -->`` and ``<!-- speed-table:end -->``
lines of the README; every row is a benchmark's row from the JSON, its figures as that run
printed them, so the table says nothing that ``run.py`` did not print.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
START, END = "<!-- speed-table:start -->", "<!-- speed-table:end -->"


def table(doc: dict) -> str:
    """The markdown table (with the line that says where and how it was measured)."""
    mode = "python benchmarks/run.py" + (" --quick" if doc["quick"] else "")
    lines = [f"Measured with `{mode}` ({doc['machine']}; a shared machine: read ratios, not "
             "absolute values; each row's date is in `benchmarks/results.json`).", "",
             "| benchmark | command | result |", "|---|---|---|"]  # fmt: skip
    for entry in doc["benchmarks"].values():
        row = entry.get("row")
        if row:
            lines.append(f"| {row['benchmark']} | `{row['command']}` | {row['result']} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, default=HERE / "results.json")
    ap.add_argument("--readme", type=Path, default=HERE.parent / "README.md")
    a = ap.parse_args()
    text = a.readme.read_text()
    head, sep, rest = text.partition(START)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise SystemExit(f"{a.readme}: no {START} ... {END} lines to replace")
    body = table(json.loads(a.json.read_text()))
    a.readme.write_text(f"{head}{START}\n{body}\n{END}{tail}")
    print(f"rewrote the speed table of {a.readme} from {a.json}")


if __name__ == "__main__":
    main()
