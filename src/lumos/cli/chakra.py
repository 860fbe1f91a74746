"""``lumos chakra <tool>``: validate, check, jsonize, stats, visualize, timeline, text2et,
generate, obfuscate.

Thin: each tool parses its options, calls :mod:`lumos.chakra` and writes its output
atomically. Inputs are one ``.et`` file (plain or gzip) or, where it makes sense, a directory
or ``<prefix>`` of ``<prefix>.<rank>.et`` files.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from lumos._io import atomic_write
from lumos.chakra import ChakraTrace, ChakraWorkload, read_chakra, write_chakra
from lumos.cli._text import field_lines
from lumos.errors import ConfigError, InputError, LumosError


def _read(path: str) -> ChakraTrace | ChakraWorkload:
    """``read_chakra``, and a file that is not a Chakra ET said to be what it is."""
    try:
        return read_chakra(path)
    except LumosError:
        kind = _other_kind(path)
        if kind is not None:
            raise InputError(path, f"this is a {kind}, not a Chakra ET "
                                   "(`lumos convert` writes one from it)") from None  # fmt: skip
        raise


def _other_kind(path: str) -> str | None:
    """'Kineto trace' / 'PyTorch execution trace' when ``path`` is one (None otherwise)."""
    from lumos.ingest.detect import expand_paths

    if not Path(path).is_file():
        return None
    try:
        refs = expand_paths([path])
    except LumosError:
        return None
    names = {"kineto": "Kineto trace", "pytorch_et": "PyTorch execution trace"}
    kinds = {names[r.kind] for r in refs if r.kind in names}
    return kinds.pop() if len(kinds) == 1 else None


def _traces(path: str) -> list[ChakraTrace]:
    data = _read(path)
    return list(data) if isinstance(data, ChakraWorkload) else [data]


def _one(path: str) -> ChakraTrace:
    data = _read(path)
    if isinstance(data, ChakraWorkload):
        raise InputError(path, "this tool takes one .et file; pass one rank's file")
    return data


def _validate(args: argparse.Namespace) -> int:
    from lumos.chakra.validate import fix_trace, validate_trace

    traces = _traces(args.path)
    if args.fix and len(traces) != 1:
        raise ConfigError("--fix takes one .et file")
    failed = 0
    for t in traces:
        report = validate_trace(t)
        status = "ok" if report.ok else "INVALID"
        print(f"{t.path}: {report.num_nodes} nodes, {len(report.errors)} errors, "
              f"{len(report.warnings)} warnings: {status}")  # fmt: skip
        for kind, n in report.counts().items():
            sev = next(p.severity for p in report.problems if p.kind == kind)
            print(f"  {sev:7s} {kind}: {n}")
            shown = [p for p in report.problems if p.kind == kind][: args.show]
            for p in shown:
                who = "" if p.node_id is None else f"node id {p.node_id}: "
                print(f"           {who}{p.detail}")
        failed += not report.ok
        if args.fix:
            fixed, changes = fix_trace(t)
            write_chakra(fixed, args.fix)
            print(f"wrote {args.fix}: " + ("; ".join(changes) if changes else "no changes"))
            remaining = validate_trace(fixed)
            if not remaining.ok:
                left = ", ".join(f"{k} {v}" for k, v in remaining.counts().items())
                print(f"  still present (needs a human decision): {left}")
    return 1 if failed else 0


def _network_for(args: argparse.Namespace, first: ChakraTrace) -> object | None:
    """``--network DIR``, else the ETs' own directory when it holds network.yml (else None)."""
    from lumos.cost.astra_files import read_astra_network

    if getattr(args, "network", None):
        return read_astra_network(args.network)
    here = Path(first.path).parent if first.path else None
    if here is not None and (here / "network.yml").is_file():
        return read_astra_network(here)
    return None


def _check(args: argparse.Namespace) -> int:
    from lumos.chakra.astra_check import check_astra

    if not args.astra_sim:
        raise ConfigError("say which consumer to check for: --astra-sim")
    traces = _traces(args.path)
    by_rank = {t.rank if t.rank is not None else i: t for i, t in enumerate(traces)}
    network = _network_for(args, traces[0])
    report = check_astra(by_rank, network)  # type: ignore[arg-type]
    status = "ok" if report.ok else "WILL NOT COMPLETE"
    print(f"{args.path}: {len(by_rank)} rank(s), ASTRA-sim: {status}")
    for kind, n in report.counts().items():
        shown = [(r, p) for r, p in report.problems if p.kind == kind]
        print(f"  {shown[0][1].severity:7s} {kind}: {n}")
        for r, p in shown[: args.show]:
            who = "" if r < 0 else f"rank {r} "
            who += "" if p.node_id is None else f"node id {p.node_id}: "
            print(f"           {who}{p.detail}")
    return 0 if report.ok else 1


def _jsonize(args: argparse.Namespace) -> int:
    from lumos.chakra.export import write_json

    t = _one(args.path)
    if args.out == "-":
        write_json(t, sys.stdout, jsonl=args.jsonl)
    else:
        with atomic_write(args.out) as f:
            write_json(t, f, jsonl=args.jsonl)
    return 0


def _stats(args: argparse.Namespace) -> int:
    from lumos.chakra.stats import trace_stats

    stats = [trace_stats(t) for t in _traces(args.path)]
    if args.json:
        print(json.dumps(stats if len(stats) > 1 else stats[0], indent=2))
        return 0
    for s in stats:
        print(f"{s['path']} (rank {s['rank']}, schema {s['schema']})")
        rest = {k: v for k, v in s.items() if k not in ("path", "rank", "schema")}
        print("\n".join(field_lines(rest)))
    return 0


def _visualize(args: argparse.Namespace) -> int:
    from lumos.chakra.export import write_dot, write_graphml

    t = _one(args.path)
    out = Path(args.out)
    fmt = args.format or ("graphml" if out.suffix == ".graphml" else "dot")
    writer = write_graphml if fmt == "graphml" else write_dot
    with atomic_write(out) as f:
        writer(t, f)
    print(f"wrote {out} ({t.num_nodes} nodes)")
    if args.render:
        if fmt != "dot":
            raise ConfigError("--render needs dot output (--format dot)")
        dot = shutil.which("dot")
        target = out.with_suffix(f".{args.render}")
        if dot is None:
            print(f"Graphviz 'dot' is not installed, so {target} was not rendered; install "
                  f"graphviz (apt-get install graphviz, brew install graphviz, conda install "
                  f"graphviz) and run: dot -T{args.render} {out} -o {target}")  # fmt: skip
            return 0
        subprocess.run([dot, f"-T{args.render}", str(out), "-o", str(target)], check=True)
        print(f"rendered {target}")
    return 0


def _timeline(args: argparse.Namespace) -> int:
    from lumos.chakra.timeline import write_timeline

    t = _one(args.path)
    with atomic_write(args.out) as f:
        blocked = write_timeline(t, f)
    print(f"wrote {args.out}: open it in https://ui.perfetto.dev or chrome://tracing")
    print(f"scheduled {t.num_nodes - blocked} of {t.num_nodes} nodes")
    if blocked:
        from lumos.chakra.deps import find_cycle, resolve_deps, topological_order

        g = resolve_deps(t)
        _, rows = topological_order(g)
        cycle = " -> ".join(str(int(t.node_id[r])) for r in find_cycle(g, rows))
        print(f"{blocked} nodes never became ready: they are on or after a dependency cycle"
              + (f" (node ids {cycle} -> ...)" if cycle else ""))  # fmt: skip
        if args.strict:
            return 1
    return 0


def _text2et(args: argparse.Namespace) -> int:
    from lumos.chakra.text2et import text_to_chakra

    try:
        text = Path(args.input).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(args.input, f"cannot read: {exc.strerror or exc}") from None
    w = text_to_chakra(text, args.num_npus, num_passes=args.num_passes,
                       cycles_per_micro=args.cycles_per_micro, source=args.input)  # fmt: skip
    files = write_chakra(w, args.out)
    print(f"wrote {len(files)} files: {files[0]} .. {files[-1]} ({w[0].num_nodes} nodes each)")
    return 0


def _generate(args: argparse.Namespace) -> int:
    from lumos.chakra.generate import microbenchmark

    w = microbenchmark(args.collective, args.num_npus, args.size)
    prefix = Path(args.out) / f"{args.collective}_{args.num_npus}npus_{args.size}" / args.collective
    files = write_chakra(w, prefix)
    print(f"wrote {len(files)} files under {prefix.parent}")
    if args.target == "astra-sim":
        from lumos.cost.astra_files import AstraNetwork, write_astra_configs

        net = AstraNetwork(npus=args.num_npus, bw_bytes_per_s=args.bandwidth * 2**30,
                           latency_ns=args.latency, chunks=args.chunks,
                           endpoint_delay_ns=args.endpoint_delay,
                           local_mem_bw_bytes_per_s=args.local_mem_bw * 1e9)  # fmt: skip
        names = ", ".join(p.name for p in write_astra_configs(net, prefix.parent))
        print(f"wrote {names} beside them (ASTRA-sim analytical backend)")
    return 0


def _obfuscate(args: argparse.Namespace) -> int:
    from lumos.synth.obfuscate import obfuscate_files
    from lumos.synth.obfuscate_names import KEY_ENV

    files = obfuscate_files(args.inputs, args.out, key=args.key, shapes=args.shapes,
                            jitter_pct=args.jitter, seed=args.seed)  # fmt: skip
    for f in files:
        dropped = ", ".join(f"{k} {v}" for k, v in f.diagnostics.items()) or "nothing"
        print(f"{f.source} -> {f.path} ({f.kind}; dropped: {dropped}); leak check passed")
    if not (args.key or os.environ.get(KEY_ENV)):
        print("no --key: names were hashed with a random key, so they cannot be linked to "
              "another run's (pass --key to keep them stable across runs)")  # fmt: skip
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``lumos chakra`` and its tools."""
    p = subparsers.add_parser("chakra", help="read, check, convert and generate MLCommons Chakra ETs",
                              description=__doc__)  # fmt: skip
    tools = p.add_subparsers(dest="tool", metavar="TOOL", required=True)

    v = tools.add_parser(
        "validate", help="check ids, deps, cycles and comm attributes; exit 1 on errors"
    )
    v.add_argument("path", help=".et file, directory or <prefix> of rank files")
    v.add_argument("--fix", metavar="OUT.et", help="write a copy without dangling/self deps")
    v.add_argument(
        "--show", type=int, default=3, help="examples shown per problem kind (default 3)"
    )
    v.set_defaults(func=_validate)

    k = tools.add_parser(
        "check", help="what makes a consumer abort or stall on a set of ETs (--astra-sim)"
    )
    k.add_argument("path", help="directory or <prefix> of rank files (or one .et)")
    k.add_argument(
        "--astra-sim",
        action="store_true",
        help="check for ASTRA-sim (analytical backend, feeder v3); exit 1 on errors",
    )
    k.add_argument(
        "--network",
        metavar="DIR",
        help="directory with network.yml and system.json (default: beside the ETs)",
    )
    k.add_argument("--show", type=int, default=3, help="examples per problem kind (default 3)")
    k.set_defaults(func=_check)

    j = tools.add_parser("jsonize", help="metadata and nodes as valid JSON (or JSON Lines)")
    j.add_argument("path")
    j.add_argument("-o", "--out", "--output", dest="out", default="-", metavar="FILE",
                   help="output file (default: stdout)")  # fmt: skip
    j.add_argument("--jsonl", action="store_true", help="one JSON object per line")
    j.set_defaults(func=_jsonize, out_kind="file")

    s = tools.add_parser(
        "stats", help="counts by type and collective, durations, edges, critical path"
    )
    s.add_argument("path")
    s.add_argument("--json", action="store_true", help="print JSON")
    s.set_defaults(func=_stats)

    g = tools.add_parser("visualize", help="Graphviz dot or GraphML; render when dot is installed")
    g.add_argument("path")
    g.add_argument("-o", "--out", "--output", dest="out", required=True, metavar="FILE",
                   help="output file: .dot or .graphml")  # fmt: skip
    g.add_argument("--format", choices=("dot", "graphml"), help="default: from the output suffix")
    g.add_argument("--render", choices=("pdf", "svg", "png"), help="also render with Graphviz dot")
    g.set_defaults(func=_visualize, out_kind="file")

    t = tools.add_parser(
        "timeline", help="Chrome/Perfetto trace of a dependency-respecting schedule"
    )
    t.add_argument("path")
    t.add_argument("-o", "--out", "--output", dest="out", required=True, metavar="FILE",
                   help="output file: Chrome/Perfetto trace JSON")  # fmt: skip
    t.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when some nodes cannot be scheduled (a dependency cycle)",
    )
    t.set_defaults(func=_timeline, out_kind="file")

    x = tools.add_parser("text2et", help="ASTRA-sim 1.0 text workload -> per-rank Chakra ETs")
    x.add_argument("input", help="text workload file")
    x.add_argument("-o", "--out", "--output", dest="out", required=True, metavar="PREFIX",
                   help="output prefix: writes PREFIX.<rank>.et")  # fmt: skip
    x.add_argument("--num-npus", type=int, required=True)
    x.add_argument("--num-passes", type=int, default=1)
    x.add_argument("--cycles-per-micro", type=float, default=1000.0,
                   help="NPU cycles per microsecond (default 1000 = 1 GHz)")  # fmt: skip
    x.set_defaults(func=_text2et, out_kind="prefix")

    m = tools.add_parser("generate", help="microbenchmark ETs: one collective per rank")
    m.add_argument(
        "--collective",
        required=True,
        help="all_reduce, all_gather, reduce_scatter, all_to_all, ...",
    )
    m.add_argument("--num-npus", type=int, required=True)
    m.add_argument("--size", default="1MB", help="message size, e.g. 1MB (default)")
    m.add_argument("-o", "--out", "--output-dir", dest="out", default=".", metavar="DIR",
                   help="output directory: writes DIR/<coll>_<N>npus_<size>/<coll>.<rank>.et "
                   "(default: .)")  # fmt: skip
    m.add_argument(
        "--target",
        choices=("astra-sim",),
        default=None,
        help="also write network.yml, system.json, remote_memory.json beside the ETs",
    )
    m.add_argument(
        "--bandwidth",
        type=float,
        default=50.0,
        help="with --target: link GB/s (ASTRA-sim's 2^30 bytes; default 50)",
    )
    m.add_argument("--latency", type=float, default=500.0, help="link latency ns (default 500)")
    m.add_argument("--chunks", type=int, default=4, help="preferred dataset splits (default 4)")
    m.add_argument("--endpoint-delay", type=int, default=10, help="ns (default 10)")
    m.add_argument("--local-mem-bw", type=float, default=50.0,
                   help="GB/s of 10^9 bytes (default 50)")  # fmt: skip
    m.set_defaults(func=_generate, out_kind="dir")

    o = tools.add_parser(
        "obfuscate",
        help="share a workload without its model: names -> op class + keyed hash, leak-checked",
        description="Obfuscate Chakra ETs and Kineto traces (sniffed by content): names become "
        "their op class plus a keyed hash, code-identifying attributes are dropped, graph and "
        "timing are kept; every output is leak-checked against every input string.",
    )
    o.add_argument("inputs", nargs="+", metavar="INPUT", help=".et or Kineto .json(.gz) files")
    o.add_argument("-o", "--out", "--output", dest="out", required=True, metavar="PREFIX",
                   help="output prefix: writes PREFIX.<rank>.et / PREFIX.<rank>.json(.gz)")  # fmt: skip
    o.add_argument(
        "--key",
        help="hash key: same key, same names across files and runs "
        "(default $LUMOS_OBFUSCATE_KEY, else random per call)",
    )
    o.add_argument(
        "--shapes",
        choices=("keep", "bucket", "drop"),
        default="keep",
        help="tensor shapes: keep, bucket (each dim rounded up to a power of two) "
        "or drop (default keep)",
    )
    o.add_argument(
        "--jitter",
        type=float,
        default=0.0,
        metavar="PCT",
        help="multiply durations by a seeded factor within +-PCT %% (default 0: off)",
    )
    o.add_argument("--seed", type=int, default=0, help="seed of --jitter (default 0)")
    o.set_defaults(func=_obfuscate, out_kind="prefix")
    for listed in tools._choices_actions:  # each tool's -h opens with what the list says of it
        tool = tools.choices[listed.dest]
        if not tool.description and listed.help:
            tool.description = listed.help[0].upper() + listed.help[1:] + "."
