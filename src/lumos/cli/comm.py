"""``lumos comm KIND --size S --ranks P ...``: predicted time of one collective, term by term;
``lumos comm --calibrate TRACE...``: latency and bandwidth fitted to a trace's collectives, or
to those ``lumos bench --comms-only`` timed (its ``bench.json``)."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from lumos.cost.astra import AstraConfig, astra_time
from lumos.cost.calibrate import Sample, calibrate_samples, graph_samples
from lumos.cost.collectives import ALGORITHMS, PROTOCOL_EFFICIENCY, CommTime, Link, collective_time
from lumos.cost.topology import PRESETS, Topology, resolve_topology
from lumos.cost.units import parse_bandwidth, parse_duration, parse_size
from lumos.errors import ConfigError, InputError

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``comm`` verb."""
    p = sub.add_parser(
        "comm",
        help="predict a collective's time (alpha-beta or ASTRA-sim-compatible); calibrate",
        description="Predict the time of one collective with the alpha-beta model on a link "
        "(--bandwidth/--latency) or a topology (--topology preset or TOML file). Any of "
        "--chunks, --endpoint-delay, --local-mem-bw selects the ASTRA-sim-compatible mode, "
        "where --bandwidth is read as ASTRA-sim reads its network config (1 GB = 2^30 bytes) "
        "and --local-mem-bw as its system config (1 GB = 10^9 bytes). Sizes follow PyTorch: "
        "all_gather takes the output size, reduce_scatter the input size. With --calibrate, "
        "fit latency and bandwidth per collective kind and group size to the traces.",
    )
    p.add_argument("kind", nargs="?", metavar="KIND",
                   help="all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce, "
                   "gather, scatter, send, recv, barrier")  # fmt: skip
    p.add_argument("--size", default=None, help="bytes, e.g. 1MiB, 64KB, 4096")
    p.add_argument("--ranks", type=int, default=None, help="ranks in the group")
    p.add_argument("--algorithm", default="auto", choices=ALGORITHMS)
    p.add_argument("--protocol", default="simple", choices=tuple(PROTOCOL_EFFICIENCY))
    p.add_argument("--bandwidth", default=None, help="link bandwidth, e.g. 50GB/s, 400Gb/s")
    p.add_argument("--latency", default=None, help="latency per step, e.g. 500ns (default 0)")
    p.add_argument("--topology", default=None, metavar="NAME|FILE",
                   help=f"a preset ({', '.join(PRESETS)}) or a TOML topology file")  # fmt: skip
    p.add_argument("--chunks", type=int, default=None, help="ASTRA-sim: dataset splits")
    p.add_argument("--endpoint-delay", default=None, help="ASTRA-sim: e.g. 10ns (default 10ns)")
    p.add_argument("--local-mem-bw", default=None, help="ASTRA-sim: e.g. 50GB/s (default)")
    p.add_argument("--calibrate", nargs="+", default=None, metavar="TRACE",
                   help="fit latency/bandwidth to the collectives of these traces, or to those "
                   "lumos bench --comms-only timed (its bench.json or output folder)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print a JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Predict or calibrate, print."""
    if args.calibrate:
        return _calibrate(args)
    if not args.kind:
        raise ConfigError("comm needs a KIND (e.g. all_reduce) or --calibrate TRACE...")
    if args.size is None or args.ranks is None:
        raise ConfigError("comm needs --size and --ranks")
    size = parse_size(args.size)
    astra = any(v is not None for v in (args.chunks, args.endpoint_delay, args.local_mem_bw))
    result, mode = (_astra(args, size), "astra-sim") if astra else (_alpha_beta(args, size),
                                                                      "alpha-beta")  # fmt: skip
    if args.json:
        print(json.dumps({**result.to_dict(), "mode": mode}, sort_keys=False))
    else:
        print(_format(result, mode))
    return 0


def _network(args: argparse.Namespace, *, binary_prefixes: bool) -> Topology | Link:
    if args.topology is not None:
        if args.bandwidth is not None or args.latency is not None:
            raise ConfigError("give either --topology or --bandwidth/--latency, not both")
        return resolve_topology(args.topology)
    if args.bandwidth is None:
        raise ConfigError("comm needs --bandwidth (and --latency) or --topology")
    bw = parse_bandwidth(args.bandwidth, binary_prefixes=binary_prefixes)
    return Link(bw_bytes_per_s=bw, latency_ns=parse_duration(args.latency or 0))


def _alpha_beta(args: argparse.Namespace, size: int) -> CommTime:
    return collective_time(args.kind, size, args.ranks, _network(args, binary_prefixes=False),
                           algorithm=args.algorithm, protocol=args.protocol)  # fmt: skip


def _astra(args: argparse.Namespace, size: int) -> CommTime:
    net = _network(args, binary_prefixes=True)
    if isinstance(net, Topology):
        if args.ranks > net.gpus_per_node:
            raise ConfigError("the ASTRA-sim-compatible mode models one dimension: "
                              f"{args.ranks} ranks exceed a node of {net.name}")  # fmt: skip
        net = Link(bw_bytes_per_s=net.intra_bw_bytes_per_s, latency_ns=net.intra_latency_ns)
    config = AstraConfig(
        bw_bytes_per_s=net.bw_bytes_per_s,
        latency_ns=net.latency_ns,
        chunks=1 if args.chunks is None else args.chunks,
        endpoint_delay_ns=10 if args.endpoint_delay is None else parse_duration(args.endpoint_delay),
        local_mem_bw_bytes_per_s=50e9 if args.local_mem_bw is None
        else parse_bandwidth(args.local_mem_bw),
    )  # fmt: skip
    return astra_time(args.kind, size, args.ranks, config, algorithm=args.algorithm)


def _us(ns: float) -> str:
    return f"{ns / 1e3:,.3f} us"


def _format(t: CommTime, mode: str) -> str:
    lines = [f"{t.kind} of {t.size_bytes:,} bytes over {t.ranks} ranks, {t.algorithm} "
             f"({mode}): {t.time_ns:,} ns ({_us(t.time_ns)})"]  # fmt: skip
    width = max(len(k) for k in t.terms)
    lines += [f"  {k:<{width}} {v:>14,} ns" for k, v in t.terms.items()]
    return "\n".join(lines)


def _bench_samples(path: str) -> list[Sample] | None:
    """The collectives a ``lumos bench --comms-only`` output timed (None: not such an output)."""
    from lumos.bench.report import BENCH_FILE, read_document

    p = Path(path)
    if not (p.name == BENCH_FILE or (p.is_dir() and (p / BENCH_FILE).is_file())):
        return None
    doc = read_document(p)
    comms = doc.get("comms")
    if not isinstance(comms, dict):
        raise InputError(p, "this bench run timed no collectives: rerun lumos bench --comms-only")
    return [(str(s["kind"]), int(s["group_size"]), int(s["size_bytes"]), int(s["time_ns"]))
            for s in comms.get("samples", []) if int(s["size_bytes"]) > 0]  # fmt: skip


def _calibrate(args: argparse.Namespace) -> int:
    from lumos.replay import build_workload

    samples: list[Sample] = []
    traces = []
    for path in args.calibrate:
        got = _bench_samples(path)
        if got is None:
            traces.append(path)
        else:
            samples.extend(got)
    if traces:
        workload, _ = build_workload(traces)
        samples.extend(graph_samples(workload))
    rows = calibrate_samples(samples)
    if args.json:
        print(json.dumps({"rows": [r.to_dict() for r in rows]}))
        return 0
    if not rows:
        print("no communication tasks with a known kind and size")
        return 0
    lines = [f"{'collective':<16}{'ranks':>6}{'samples':>9}{'sizes':>7}"
             f"{'latency us':>12}{'bandwidth GB/s':>16}{'r2':>7}{'rel rms':>9}"]  # fmt: skip
    for r in rows:
        head = f"{r.kind:<16}{r.group_size:>6}{r.samples:>9}{r.distinct_sizes:>7}"
        if r.fit is None:
            lines.append(f"{head}  {r.note}")
            continue
        f: Any = r.fit
        finite = math.isfinite(f.bw_bytes_per_s)
        bw = f"{f.bw_bytes_per_s / 1e9:>16.2f}" if finite else f"{'-':>16}"
        lines.append(f"{head}{f.latency_ns / 1e3:>12.2f}{bw}{f.r2:>7.3f}{f.rel_rms * 100:>8.1f}%"
                     + (f"  {r.note}" if r.note else ""))  # fmt: skip
    print("\n".join(lines))
    return 0
