"""``lumos estimate TRACE... --set KEY=VALUE -o DIR``: what-if scenarios against the baseline."""

from __future__ import annotations

import argparse
import re
from typing import Any

from lumos.cli._args import add_parallel_args
from lumos.cli._progress import progress_bar
from lumos.cost.topology import PRESETS
from lumos.errors import ConfigError
from lumos.estimate import estimate, parse_scenario, parse_sweep, write_estimate
from lumos.estimate.scenario import KEYS
from lumos.ingest.detect import expand_paths
from lumos.replay import build_workload

__all__ = ["format_estimate", "register"]


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``estimate`` verb."""
    p = sub.add_parser(
        "estimate",
        help="what-if: predict step time for another configuration",
        description="Replay the traced ranks as the baseline, then simulate each scenario "
        "(--set, repeatable, one KEY=VALUE each; --sweep KEY=V1,V2 for one scenario per value) "
        f"and compare. Keys: {', '.join(KEYS)}. Writes DIR/estimate.json (rows, baseline first). "
        "A model size asks only for the baseline values its re-timing uses: hidden needs "
        "hidden, ffn (it follows hidden unless --set ffn=N) and heads when the trace has "
        "attention; ffn needs ffn; heads needs heads and hidden; seq and microbatch_size need "
        "themselves; all need the "
        "tokens per micro-batch, read from the shapes. A value the trace does not show is "
        "named in the error, with the --baseline KEY=N that gives it.",
    )
    p.add_argument("paths", nargs="+", metavar="TRACE", help="Kineto traces or a run directory")
    p.add_argument("-o", "--out", required=True, metavar="DIR",
                   help="output directory: estimate.json")  # fmt: skip
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="one scenario setting, e.g. dp=16, straggler=3:1.5, link=2:2, layers=48, "
        "hidden=8192, seq=4096, microbatches=8",
    )
    p.add_argument(
        "--sweep",
        action="append",
        default=[],
        metavar="KEY=V1,V2,...",
        help="one scenario per value (on top of --set)",
    )
    p.add_argument(
        "--baseline",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a value of the baseline configuration found in the trace "
        "(see `lumos layers`), e.g. hidden=4096, seq=2048, tokens=8192 (micro-batch size x "
        "sequence)",
    )
    p.add_argument(
        "--topology",
        default=None,
        metavar="NAME|FILE",
        help="network for scenarios that re-time communication (dp, link): a preset ("
        + ", ".join(PRESETS)
        + ") or a TOML topology file",
    )
    p.add_argument("--algorithm", default="auto", help="collective algorithm (default: auto)")
    p.add_argument(
        "--device-memory",
        default=None,
        metavar="SIZE",
        help="capacity the peak memory must fit, e.g. 80GiB (default: the GPU's totalGlobalMem "
        "from the trace; CPU-only jobs: none unless given)",
    )
    p.add_argument(
        "--chakra",
        default=None,
        metavar="PREFIX",
        help="also write each scenario's edited graph as Chakra ETs: PREFIX.<rank>.et (one "
        "scenario) or PREFIX.<scenario>.<rank>.et, which lumos bench executes",
    )
    add_parallel_args(p)
    p.set_defaults(func=run, out_kind="dir")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    """Estimate every scenario, print the table, write estimate.json."""
    base = parse_scenario(args.sets)
    scenarios = parse_sweep(base, args.sweep) if args.sweep else [base]
    if args.chakra:
        from lumos._io import check_writable

        check_writable(args.chakra, "prefix")
    n = len(expand_paths(args.paths))
    with progress_bar("building graphs", n) as advance:
        workload, sources = build_workload(
            args.paths, workers=args.workers, dask_address=args.dask, on_done=advance
        )
    factory = comm_model_factory(args.topology, args.algorithm) if args.topology else None
    from lumos.cli.layers import parse_baseline

    edited: list[tuple[Any, Any]] = []
    keep = (lambda s, w: edited.append((s, w))) if args.chakra else None
    try:
        est = estimate(
            workload,
            scenarios,
            comm_model=factory,
            baseline=parse_baseline(args.baseline),
            on_edited=keep,
            device_memory=parse_size(args.device_memory) if args.device_memory else None,
        )
    except ConfigError as exc:  # a scenario the trace cannot answer: say which trace
        raise ConfigError(f"{traces_named(args.paths)}: {exc}") from None
    est = type(est)(est.rows, tuple(sources), est.baseline)
    path = write_estimate(est, args.out)
    print(format_estimate(est.to_dict()))
    print(f"wrote {path}")
    if args.chakra:
        for prefix, scenario, n in write_scenario_ets(args.chakra, edited):
            note = (
                "; its communication as traced (the network model's re-timing is not in the ET)"
                if scenario.needs_comm_model
                else ""
            )
            print(f"wrote {n} Chakra ET(s) {prefix}.<rank>.et ({scenario.label}{note})")
    return 0


def traces_named(paths: list[str]) -> str:
    """The traces of a command, for an error: the one path, or the first and how many more."""
    return paths[0] if len(paths) == 1 else f"{paths[0]} (+{len(paths) - 1} more)"


def scenario_prefix(prefix: str, label: str, many: bool) -> str:
    """Where a scenario's ETs go: ``prefix`` itself when it is the only one, else
    ``prefix.<label as a file name>``.

    >>> scenario_prefix("out/x", "layers=8 hidden=256", True)
    'out/x.layers-8-hidden-256'
    """
    import re

    return f"{prefix}.{re.sub(r'[^A-Za-z0-9]+', '-', label).strip('-')}" if many else prefix


def write_scenario_ets(prefix: str, edited: list[tuple[Any, Any]]) -> list[tuple[str, Any, int]]:
    """Each scenario's edited workload as ``<prefix>.<rank>.et`` files (see
    :func:`scenario_prefix`); ``(prefix, scenario, files)`` per scenario."""
    from lumos.chakra.io import write_chakra
    from lumos.chakra.mapping import workload_to_chakra

    out = []
    for scenario, workload in edited:
        p = scenario_prefix(prefix, scenario.label, len(edited) > 1)
        files = write_chakra(workload_to_chakra(workload, delay_nodes=True), p)
        out.append((p, scenario, len(files)))
    return out


def comm_model_factory(topology: str, algorithm: str) -> Any:
    """The communication cost model for ``--topology`` (see :mod:`lumos.cost`)."""
    from lumos.cost.comm_model import comm_model_for

    return comm_model_for(topology, algorithm)


_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}  # fmt: skip


def parse_size(text: str) -> int:
    """``"80GiB"`` -> bytes (B, kB/MB/GB/TB in powers of ten, KiB/MiB/GiB/TiB of two)."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*", text)
    unit = m.group(2).lower() if m else ""
    if m is None or unit not in _UNITS:
        raise ConfigError(f"--device-memory {text!r}: expected a size such as 80GiB or 40GB")
    return round(float(m.group(1)) * _UNITS[unit])


def _gib(b: int) -> str:
    return f"{b / (1 << 30):.3f} GiB" if b >= 1 << 30 else f"{b / (1 << 20):.1f} MiB"


def _ms(ns: float) -> str:
    return f"{ns / 1e6:10.3f}"


def format_estimate(doc: dict[str, Any]) -> str:
    """Baseline and scenarios side by side: step time, change, the four-way breakdown."""
    rows = doc["rows"]
    base = rows[0]["step_ns"] or 1
    parts = ("exposed_compute_ns", "overlapped_ns", "exposed_comm_ns", "other_ns")
    head = f"{'scenario':<28}{'step ms':>10}{'change':>9}" + "".join(
        f"{p.removesuffix('_ns').replace('_', ' '):>18}" for p in parts
    )
    memory = any(r.get("peak_memory_bytes") is not None for r in rows)
    if memory:
        head += f"{'peak memory':>16}{'fits':>6}"
    lines = [head]
    for r in rows:
        label = r["config"]["label"]
        if "measured_step_ns" in r:
            label += f" (measured {r['measured_step_ns'] / 1e6:.3f})"
        change = (r["step_ns"] / base - 1) * 100
        line = f"{label:<28}{_ms(r['step_ns'])}{change:+8.1f}%"
        line += "".join(f"{_ms(r['breakdown'].get(p, 0)):>18}" for p in parts)
        if memory:
            peak, fits = r.get("peak_memory_bytes"), r.get("fits")
            line += f"{_gib(peak) if peak is not None else '?':>16}"
            line += f"{'?' if fits is None else 'yes' if fits else 'NO':>6}"
        lines.append(line)
    for r in rows:
        if r.get("fits") is False:
            lines.append(
                f"{r['config']['label']}: does NOT fit: peak {_gib(r['peak_memory_bytes'])} > "
                f"device {_gib(r['capacity_bytes'])}"
            )
    if len(rows[0]["ranks"]) > 1:
        lines.append("per-rank step ms:")
        for r in rows:
            per = " ".join(f"{x['rank']}:{x['step_ns'] / 1e6:.2f}" for x in r["ranks"])
            lines.append(f"  {r['config']['label']:<26}{per}")
    return "\n".join(lines)
