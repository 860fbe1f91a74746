"""Run every benchmark with its peer where one is installed, print the figures, write a JSON.

    .venv/bin/python benchmarks/run.py [--quick] [--only NAME ...] [--json PATH]
    .venv/bin/python benchmarks/readme_table.py [--json PATH]   # README speed table <- JSON

Each benchmark (``benchmarks/bench_*.py``) runs in its own process, one after another (so that
peak memory is its own), with the arguments below (``--quick``: smaller inputs; the collection
and causal-accuracy benchmarks, which are not speed figures, are then skipped). Its output is
printed as it is, and the figures of the README's speed table are taken from it by the patterns
below, so every figure in the JSON, and in the table generated from it, is one a benchmark
printed in this run. Peers: mlc-chakra (``bench_chakra``: its protobuf reader on the same
files, interleaved, printed as ratios); HolisticTraceAnalysis is not a dependency, and when it
is not installed the ingest row says so instead of a ratio.

The JSON (default ``benchmarks/results.json``) holds the machine, the date, the mode, and per
benchmark its date, command, exit status, wall seconds, extracted figures, table row and full
output. ``--only NAME ...`` reruns those benchmarks and keeps the others' entries of the file.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_JSON = HERE / "results.json"


@dataclass(frozen=True)
class Bench:
    """One benchmark run: its script and arguments (full, quick; None: skipped), the figures
    taken from its output (name -> regex with one group, its last match; ``*name``: every
    match, shown as min-max), and the README row (label, result template) those figures fill, if any."""

    name: str
    script: str
    full: list[str] | None
    quick: list[str] | None
    figures: dict[str, str] = field(default_factory=dict)
    row: tuple[str, str] | None = None


BENCHES = [
    Bench(
        "ingest",
        "bench_ingest.py",
        ["--repeat", "3"],
        ["--repeat", "2"],
        {
            "mb": r"([\d.]+) MB JSON",
            "events": r"MB JSON, (\d+) events",
            "mbps": r"gunzip incl\.\)\s+[\d.]+ s\s+([\d.]+) MB/s",
            "mem": r"= ([\d.]+)x the JSON",
        },
        (
            "Kineto ingest, {events} events, {mb} MB JSON",
            "{mbps} MB/s end to end (gunzip included), peak memory {mem}x the JSON; {peer}",
        ),
    ),
    Bench(
        "sim",
        "bench_sim.py",
        ["--tasks", "5000000", "--repeat", "3"],
        ["--tasks", "1000000", "--repeat", "2"],
        {
            "tasks": r"generate: ([\d,]+) tasks",
            "tps": r"= ([\d.]+) M tasks/s",
            "rss": r"peak RSS: (\d+) MB",
        },
        ("simulate, {tasks}-task synthetic graph", "{tps}M tasks/s, {rss} MB peak RSS"),
    ),
    Bench(
        "scale",
        "bench_scale.py",
        ["--ranks", "8", "64", "512"],
        ["--ranks", "8", "64"],
        {
            "ranks": r"\n\s*(\d+)\s+\d+\s+[\d.]+\s+[\d.]+\s+\d+\s+\d+\s+[\d.]+\s*$",
            "tasks": r"\n\s*\d+\s+(\d+)\s+[\d.]+\s+[\d.]+\s+\d+\s+\d+\s+[\d.]+\s*$",
            "build": r"\n\s*\d+\s+\d+\s+([\d.]+)\s+[\d.]+\s+\d+\s+\d+\s+[\d.]+\s*$",
            "sim": r"\n\s*\d+\s+\d+\s+[\d.]+\s+([\d.]+)\s+\d+\s+\d+\s+[\d.]+\s*$",
            "rss": r"\n\s*\d+\s+\d+\s+[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+[\d.]+\s*$",
        },
        (
            "coupled simulation, synthetic data-parallel job",
            "{ranks} ranks ({tasks} tasks): build {build} s, simulate {sim} s, {rss} MB peak RSS",
        ),
    ),
    Bench(
        "build",
        "bench_scale.py",
        ["--build", "64"],
        ["--build", "8"],
        {
            "n": r"one process\s+(\d+)",
            "one": r"one process\s+\d+\s+\d+\s+[\d.]+\s+(\d+)",
            "two": r"\d+ processes\s+\d+\s+\d+\s+[\d.]+\s+(\d+)",
            "dask": r"dask, \d+ workers\s+\d+\s+\d+\s+[\d.]+\s+(\d+)",
        },
        (
            "per-rank graph building, real DLRM traces",
            "{n} traces: {one} tasks/s in one process, {two} with 2 processes, {dask} on a "
            "2-worker local Dask cluster",
        ),
    ),
    Bench(
        "replay",
        "bench_replay.py",
        [],
        [],
        {
            "*build": r"%\s+(\d+)\s+\d+\s*$",
            "*sim": r"%\s+\d+\s+(\d+)\s*$",
            "err": r"mean \|error\| ([\d.]+%)",
        },
        (
            "build_graph + simulate on real traces",
            "{build} tasks/s build, {sim} tasks/s simulate (mean step error {err})",
        ),
    ),
    Bench(
        "chakra",
        "bench_chakra.py",
        ["--nodes", "1000000", "--upstream-nodes", "200000"],
        ["--nodes", "200000", "--upstream-nodes", "50000", "--repeat", "2"],
        {
            "nodes": r"file: ([\d,]+) nodes",
            "read": r"read_chakra :\s+([\d,]+) nodes/s",
            "write": r"write_chakra:\s+([\d,]+) nodes/s",
            "parse": r"\(parse only\)[^\n]*read_chakra is ([\d.]+)x",
        },
        (
            "Chakra read / write, synthetic ET",
            "{nodes} nodes: {read} / {write} nodes/s; read {parse}x mlc-chakra's parser",
        ),
    ),
    Bench(
        "chakra_real",
        "bench_chakra.py",
        ["--realistic", "--repeat", "5"],
        ["--realistic", "--repeat", "3"],
        {
            "conv": r"lumos convert[^\n]*read_chakra is ([\d.]+)x",
            "nodes": r"lumos convert \(([\d,]+) nodes",
            "up": r"chakra\.0\.et, upstream[^\n]*read_chakra is ([\d.]+)x",
            "files": r"all (\d+) realdata ETs",
            "all": r"realdata ETs[^\n]*read_chakra is ([\d.]+)x",
            "conv_cols": r"lumos convert[^\n]*\n[^\n]*\n  the same fields as columns[^\n]* ([\d.]+)x",
            "up_cols": r"chakra\.0\.et, upstream[^\n]*\n[^\n]*\n  the same fields as columns"
            r"[^\n]* ([\d.]+)x",
            "fresh": r"lumos convert(?:[^\n]*\n){3}  each in a fresh process[^\n]*: ([\d.]+)x per",
            "fresh_cols": r"lumos convert(?:[^\n]*\n){3}  each in a fresh[^\n]*, ([\d.]+)x as col",
            "whole": r"lumos convert(?:[^\n]*\n){4}  each as a whole process[^\n]*: ([\d.]+)x per",
        },
        (
            "Chakra read + every node's id, name, type, deps, duration, attribute names",
            "{conv}x mlc-chakra on the ET `lumos convert` writes for df_index_resolver ({nodes} "
            "nodes; in a fresh process {fresh}x after the imports, {whole}x as a whole process, "
            "columns {fresh_cols}x), {up}x on upstream's chakra.0.et, {all}x on all {files} "
            "realdata ETs (node views); the same fields as columns {conv_cols}x and {up_cols}x",
        ),
    ),
    Bench(
        "convert",
        "bench_convert.py",
        ["--repeat", "3"],
        ["--repeat", "1"],
        {"events": r"(\d+) events, \d+ tasks", "eps": r"end to end[^\n]*?([\d,]+) events/s"},
        (
            "convert (read, build, map, write), df_index_resolver",
            "{eps} events/s ({events} trace events kept by ingest)",
        ),
    ),
    Bench(
        "et",
        "bench_et.py",
        ["--repeat", "3"],
        ["--repeat", "2"],
        {"mbps": r"read_pytorch_et: \d+ ms = ([\d.]+) MB/s", "ratio": r"\(ratio ([\d.]+)x\)"},
        ("PyTorch ET read", "{mbps} MB/s ({ratio}x json.loads)"),
    ),
    Bench(
        "perfetto",
        "bench_perfetto.py",
        ["--repeat", "3"],
        ["--repeat", "2"],
        {
            "tasks": r"(\d+) tasks, [\d.]+ MB JSON",
            "mb": r"tasks, ([\d.]+) MB JSON",
            "gzmb": r"MB JSON \(([\d.]+) MB gzip\)",
            "plain": r"streamed \.json\s+[\d.]+ s\s+(\d+) MB/s",
            "gz": r"streamed \.json\.gz\s+[\d.]+ s\s+(\d+) MB/s",
            "ratio": r"streamed is ([\d.]+)x",
        },
        (
            "Perfetto trace of a replay, df_index_resolver ({tasks} tasks, {mb} MB JSON)",
            "streamed {plain} MB/s, gzip {gz} MB/s ({gzmb} MB); {ratio}x the former dict + "
            "json.dump",
        ),
    ),
    Bench(
        "multirank",
        "bench_multirank.py",
        ["--ranks", "8", "64", "256", "--repeat", "3"],
        ["--ranks", "8", "64", "--repeat", "2"],
        {
            "build": r"build 8: ([\d.]+) s",
            "ranks": r"\n\s*(\d+)\s+\d+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+\d+\s*$",
            "tasks": r"\n\s*\d+\s+(\d+)\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+\d+\s*$",
            "replay": r"\n\s*\d+\s+\d+\s+[\d.]+\s+([\d.]+)\s+[\d.]+\s+\d+\s*$",
            "total": r"\n\s*\d+\s+\d+\s+[\d.]+\s+[\d.]+\s+([\d.]+)\s+\d+\s*$",
        },
        (
            "multi-rank replay, the 8-rank DLRM job replicated",
            "{ranks} ranks ({tasks} tasks): replay (simulate + every rank's summary) {replay} s, "
            "{total} s with the 8 graph builds ({build} s)",
        ),
    ),
    Bench(
        "replay_ranks",
        "bench_replay_ranks.py",
        ["--ranks", "256", "--repeat", "3"],
        ["--ranks", "64", "--repeat", "2"],
        {
            "ranks": r"(\d+) ranks, [\d.]+ MB of Kineto traces",
            "mb": r"ranks, ([\d.]+) MB of Kineto traces",
            "tasks": r"MB of Kineto traces \(\w+\), (\d+) tasks",
            "wall": r"\(end to end, best of \d+\): ([\d.]+) s",
            "tps": r"\(end to end, best of \d+\): [\d.]+ s, (\d+) tasks/s",
            "out": r"tasks/s, (\d+) MB written",
        },
        (
            "`lumos replay RUN -o DIR` end to end, the 8-rank DLRM job replicated to {ranks} "
            "ranks on disk ({mb} MB of traces)",
            "{wall} s for {tasks} tasks ({tps} tasks/s), every output written ({out} MB)",
        ),
    ),
    Bench(
        "big",
        "bench_big.py",
        ["--copies", "31"],
        ["--copies", "5"],
        {
            "mb": r"trace: (\d+) MB JSON",
            "events": r"MB JSON, (\d+) events",
            "tasks": r"(\d+) tasks; read_kineto",
            "read": r"read_kineto ([\d.]+) s",
            "build": r"build_graph ([\d.]+) s",
            "replay": r"replay ([\d.]+) s, write_replay",
            "write": r"write_replay ([\d.]+) s",
            "wall": r"replay end to end: ([\d.]+) s",
            "rss": r"peak RSS ([\d.]+) GB",
            "ingest": r"ingest (\d+) MB/s",
        },
        (
            "`lumos replay FILE -o DIR` end to end, a {mb} MB Kineto trace ({events} events: "
            "df_index_resolver replicated in time)",
            "{wall} s, peak RSS {rss} GB, {tasks} tasks (read {read} s = {ingest} MB/s, build "
            "{build} s, simulate {replay} s, write {write} s)",
        ),
    ),
    Bench(
        "first_run",
        "bench_first_run.py",
        ["--repeat", "3"],
        ["--repeat", "1"],
        {
            "version": r"start-up lumos --version: ([\d.]+) s",
            "bare": r"start-up python -c pass: ([\d.]+) s",
            "info": r"start-up lumos info 35 KB trace: ([\d.]+) s",
            "penalty": r"first-run penalty: median (-?[\d.]+) s",
            "ratio": r"first/second ratio: median ([\d.]+)x",
            "*per": r"\(medians\), penalty (-?[\d.]+) s",
            "chakra": r"first Chakra read in a process: [^\n]*: ([\d.]+)x",
            "left": r"commands: [\d.]+ s, (\d+) processes left",
        },
        (
            "one process: start-up; first command after install (`lumos replay` of the bundled "
            "example, df_index_resolver and upstream's chakra.0.et, `lumos info chakra.0.et`, "
            "`lumos convert df_index_resolver`) against the second",
            "`lumos --version` {version} s (bare Python {bare} s), `lumos info` of a 35 KB trace "
            "{info} s; a first command {penalty} s slower than the second (median; per command, "
            "medians {per} s), {ratio}x; the first Chakra read in a process {chakra}x the "
            "second; a loop of 16 commands leaves {left} processes",
        ),
    ),
    Bench("collect", "bench_collect.py", [], None),
    Bench("causal", "bench_causal.py", [], None),
]


def _figures(bench: Bench, out: str) -> dict[str, str]:
    got: dict[str, str] = {}
    for key, pattern in bench.figures.items():
        if key.startswith("*"):
            found = re.findall(pattern, out, re.MULTILINE)
            if found and any("." in v for v in found):  # decimals: as printed, 2 places
                floats = [float(v) for v in found]
                got[key[1:]] = f"{min(floats):.2f} to {max(floats):.2f}"
            elif found:
                values = [int(v.replace(",", "")) for v in found]
                got[key[1:]] = f"{min(values):,}-{max(values):,}"
        else:
            found = re.findall(pattern, out, re.MULTILINE)
            if found:
                got[key] = found[-1]  # the last: the largest size of a table
    return got


def _peer(bench: Bench) -> str:
    if bench.name != "ingest":
        return ""
    if importlib.util.find_spec("hta") is None:
        return "HTA not installed: no ratio"
    return "HTA installed: not compared here"


def _row(bench: Bench, entry: dict[str, object]) -> None:
    """Fill ``entry``'s figures and table row from its printed output."""
    figs = _figures(bench, str(entry["output"]))
    entry["figures"] = figs
    if bench.row:
        label, template = bench.row
        try:
            result = template.format(peer=_peer(bench), **figs).rstrip("; ")
        except KeyError as missing:
            result = f"not measured ({missing} not in the output)"
        with contextlib.suppress(KeyError):  # the result says what is missing
            label = label.format(**figs)
        entry["row"] = {"benchmark": label, "command": entry["command"], "result": result}


def run_one(bench: Bench, args: list[str]) -> dict[str, object]:
    cmd = [sys.executable, str(HERE / bench.script), *args]
    shown = " ".join(["python", f"benchmarks/{bench.script}", *args])
    print(f"=== {bench.name}: {shown}", flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE.parent)
    wall = time.perf_counter() - t0
    out = proc.stdout + (proc.stderr if proc.returncode else "")
    print(out.rstrip(), flush=True)
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    entry: dict[str, object] = {"date": date, "command": shown, "rc": proc.returncode,
                                "wall_s": round(wall, 1), "output": out}  # fmt: skip
    _row(bench, entry)
    return entry


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller inputs; skip collect/causal")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="run only these benchmarks")
    ap.add_argument("--json", type=Path, default=DEFAULT_JSON)
    ap.add_argument("--reextract", action="store_true",
                    help="run nothing: take the figures again from the outputs in --json")  # fmt: skip
    a = ap.parse_args()
    if a.reextract:
        doc = json.loads(a.json.read_text())
        for bench in BENCHES:
            if bench.name in doc["benchmarks"]:
                _row(bench, doc["benchmarks"][bench.name])
        a.json.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"re-extracted the figures of {a.json}")
        return
    t0 = time.perf_counter()
    results: dict[str, object] = {}
    if a.only and a.json.exists():  # rerun some: the others stay as that file has them
        results = json.loads(a.json.read_text())["benchmarks"]
    for bench in BENCHES:
        args = bench.quick if a.quick else bench.full
        if args is None or (a.only and bench.name not in a.only):
            continue
        results[bench.name] = run_one(bench, args)
        _write(a.json, results, a.quick, t0)  # after each: a failure later loses nothing
    print("\n=== summary")
    for name, entry in results.items():
        row = entry.get("row") if isinstance(entry, dict) else None
        if isinstance(row, dict):
            print(f"{name:12} {row['result']}")
    total = _write(a.json, results, a.quick, t0)
    print(f"wrote {a.json} ({total} s in all)")


def _write(path: Path, results: dict[str, object], quick: bool, t0: float) -> float:
    """Write the JSON (atomically: a file beside it, then renamed); returns the seconds so far."""
    total = round(time.perf_counter() - t0, 1)
    doc = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}",
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "quick": quick,
        "total_s": total,
        "benchmarks": results,
    }
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    tmp.replace(path)
    return total


if __name__ == "__main__":
    main()
