"""Chakra read/write speed on a synthetic ET, and the ratio against mlc-chakra's reader.

    .venv/bin/python benchmarks/bench_chakra.py [--nodes 1000000] [--upstream-nodes N]

Builds a trace of ``--nodes`` nodes (COMP nodes with 2 data deps and 1 ctrl dep, every 10th a
COMM_COLL with comm_type/comm_size, 200 distinct names, 1-3 attributes per node), writes it with
``write_chakra``, reads it back with ``read_chakra`` and, when the ``chakra`` package
(mlc-chakra) is importable, reads the same file with its protobuf reader (``protolib``), which
is slow: ``--upstream-nodes`` caps how many of its nodes are timed (the rate is per node).
Prints nodes/s, MB/s and peak RSS. Timings are wall-clock, best of ``--repeat``.

``--realistic`` instead reads real files with every node's id, name, type, deps, duration and
attribute names accessed, by ``read_chakra(...).iter_nodes()`` and by mlc-chakra's protobuf
reader, interleaved in one run (``--repeat`` rounds of at least 0.5 s a side, medians): the ``.et`` that ``lumos convert``
writes for ``df_index_resolver`` (converted into a temporary folder first) and upstream's own
``chakra/tests/data/chakra.0.et``. Prints each side's wall time and the ratio, then the floor
that no reader handing out a Python object per node can go below (reading the file, the access
loop itself over objects whose fields are Python values already, the Python ints of every id,
dep and duration; best of
``--repeat``) and the largest ratio that floor leaves, and the time and ratio of the same fields
read as columns (``ChakraTrace`` arrays, a name per node and attribute gathered). Then the same
three reads of each file, each in a fresh process, timed after the imports (issue #30's
measure: what a one-shot script pays), interleaved, ``--repeat`` rounds, medians.

``--delay-table`` instead prints, for the real replay traces (read in place from the realdata
folder, ``LUMOS_REALDATA`` or ``../shared/realdata``; see ``tests/REALDATA.md``), the makespan of a
consumer that honours only ``data_deps`` + ``duration_micros`` (unlimited concurrency, like
ASTRA-sim's dependency resolution) on ``to_chakra(g)`` and ``to_chakra(g, delay_nodes=True)``,
next to lumos's replay span.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from lumos.chakra import NodeType, attr, read_chakra, write_chakra
from lumos.chakra.attrs import encode_attr
from lumos.chakra.trace import ChakraMetadata, ChakraTrace


def synthetic(n: int) -> ChakraTrace:
    bodies = [encode_attr(a) for a in (attr("is_cpu_op", False), attr("comm_type", 0),
                                       attr("comm_size", 1 << 20))]  # fmt: skip
    blob = np.frombuffer(b"".join(bodies), dtype=np.uint8)
    offs = np.cumsum([0] + [len(b) for b in bodies])[:-1]
    is_comm = (np.arange(n) % 10) == 9
    n_attr = np.where(is_comm, 3, 1)
    attr_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(n_attr, out=attr_ptr[1:])
    slot = np.arange(attr_ptr[-1]) - np.repeat(attr_ptr[:-1], n_attr)
    ids = np.arange(1, n + 1, dtype=np.uint64)
    data = np.stack([np.maximum(ids - 1, 1), np.maximum(ids - 2, 1)], axis=1).ravel()
    data_ptr = np.arange(0, 2 * n + 1, 2, dtype=np.int64)
    rng = np.random.default_rng(0)
    empty_i = np.zeros(0, np.int64)
    return ChakraTrace(
        metadata=ChakraMetadata.build("0.0.4", [attr("schema", "synthetic")]),
        node_id=ids, name_idx=(np.arange(n) % 200).astype(np.int32),
        names=tuple(f"aten::op_{k}" for k in range(200)),
        node_type=np.where(is_comm, NodeType.COMM_COLL_NODE, NodeType.COMP_NODE).astype(np.int8),
        ctrl_ptr=np.arange(n + 1, dtype=np.int64), ctrl_deps=np.maximum(ids // 2, 1),
        data_ptr=data_ptr, data_deps=data,
        start_time_micros=np.zeros(n, np.uint64),
        duration_micros=rng.integers(1, 5000, n).astype(np.uint64), blob=blob,
        inputs_off=np.zeros(n, np.int64), inputs_len=np.full(n, -1, np.int64),
        outputs_off=np.zeros(n, np.int64), outputs_len=np.full(n, -1, np.int64),
        attr_ptr=attr_ptr, attr_off=offs[slot].astype(np.int64),
        attr_len=np.array([len(b) for b in bodies], np.int64)[slot],
        attr_name_idx=slot.astype(np.int32), attr_names=("is_cpu_op", "comm_type", "comm_size"),
        attr_kind=np.array([27, 9, 9], np.int8)[slot],
        attr_int=np.array([0, 0, 1 << 20], np.int64)[slot], attr_float=np.zeros(slot.size),
        unk_ptr=np.zeros(n + 1, np.int64), unk_off=empty_i, unk_len=empty_i,
    )  # fmt: skip


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def upstream_rate(path: Path, limit: int, extract: bool) -> float | None:
    """Upstream nodes/s: parse only, or parse and pull out what ``read_chakra`` returns."""
    try:
        from chakra.schema.protobuf import et_def_pb2
        from chakra.src.third_party.utils.protolib import decodeMessage
    except ImportError:
        return None
    t0 = time.perf_counter()
    count = 0
    with open(path, "rb") as f:
        decodeMessage(f, et_def_pb2.GlobalMetadata())
        while count < limit:
            node = et_def_pb2.Node()
            if not decodeMessage(f, node):
                break
            if extract:
                _ = (node.id, node.name, node.type, list(node.data_deps), list(node.ctrl_deps),
                     node.duration_micros, [(a.name, a.WhichOneof("value")) for a in node.attr])  # fmt: skip
            count += 1
    return count / (time.perf_counter() - t0)


# phenomenon names of tests/realdata.py
DELAY_TRACES = [
    "alltoall_4streams", "v100_stream_wait_event", "sendrecv_5streams_rank0",
    "sendrecv_5streams_rank1", "legacy_2021_v100", "rccl_mi300", "cuda_event_sync", "hip_mi250",
]  # fmt: skip


def deps_only_span_us(trace: ChakraTrace) -> int:
    from lumos.chakra.deps import resolve_deps, topological_order

    g = resolve_deps(trace)
    order, _ = topological_order(g)
    dur = trace.duration_micros.astype(np.int64)
    end = np.zeros(trace.num_nodes, dtype=np.int64)
    for v in order.tolist():
        preds = g.pred_idx[g.pred_ptr[v] : g.pred_ptr[v + 1]]
        end[v] = (end[preds].max() if preds.size else 0) + dur[v]
    return int(end.max())


def delay_table() -> None:
    from _realdata import trace_or_exit
    from lumos.chakra.mapping import to_chakra
    from lumos.graph.build import build_graph
    from lumos.ingest.kineto import read_kineto
    from lumos.sim import simulate

    paths = [(name, trace_or_exit(name)) for name in DELAY_TRACES]
    print(
        "| trace | tasks | delay nodes | lumos replay (us) | deps only | deps only + delay nodes |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name, path in paths:
        g = build_graph(read_kineto(path))
        r = simulate(g)
        replay = (int(r.end_ns.max()) - int(r.start_ns.min())) / 1000
        plain, delayed = to_chakra(g), to_chakra(g, delay_nodes=True)
        a, b = deps_only_span_us(plain), deps_only_span_us(delayed)
        print(f"| {name} | {g.num_tasks} | {delayed.num_nodes - plain.num_nodes} | {replay:.0f} "
              f"| {a} ({(a / replay - 1) * 100:+.1f} %) | {b} ({(b / replay - 1) * 100:+.1f} %) |")  # fmt: skip


def _ours_fields(path: Path) -> int:
    count = 0
    for n in read_chakra(path).iter_nodes():
        _ = (n.id, n.name, n.type, list(n.data_deps), list(n.ctrl_deps), n.duration_micros,
             [a.name for a in n.attrs])  # fmt: skip
        count += 1
    return count


def _ours_columns(path: Path) -> int:
    """The same fields as :func:`_ours_fields`, every node's at once as columns: ids, types,
    durations and the dependency lists (offsets + ids) as they are read, and a name per node
    and per attribute gathered into object arrays."""
    t = read_chakra(path)
    _ = (t.node_id, t.names_array.take(t.name_idx), t.node_type, t.data_ptr, t.data_deps,
         t.ctrl_ptr, t.ctrl_deps, t.duration_micros, t.attr_ptr,
         t.attr_names_array.take(t.attr_name_idx))  # fmt: skip
    return t.num_nodes


def _upstream_fields(path: Path) -> int:
    from chakra.schema.protobuf import et_def_pb2
    from chakra.src.third_party.utils.protolib import decodeMessage

    count = 0
    with open(path, "rb") as f:
        decodeMessage(f, et_def_pb2.GlobalMetadata())
        while True:
            node = et_def_pb2.Node()
            if not decodeMessage(f, node):
                break
            _ = (node.id, node.name, node.type, list(node.data_deps), list(node.ctrl_deps),
                 node.duration_micros, [a.name for a in node.attr])  # fmt: skip
            count += 1
    return count


def realistic(repeat: int) -> None:
    import statistics
    import subprocess
    import sys

    from _realdata import realdata_or_exit, trace_or_exit

    try:
        import chakra.schema.protobuf.et_def_pb2  # noqa: F401
    except ImportError:
        print("mlc-chakra not installed: no upstream comparison")
        return
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(
            [sys.executable, "-m", "lumos", "convert", str(trace_or_exit("v100_stream_wait_event")),
             "-o", f"{d}/dfi"], check=True, capture_output=True,
        )  # fmt: skip
        files = [("df_index_resolver, lumos convert", next(Path(d).glob("dfi.*.et"))),
                 ("chakra.0.et, upstream", realdata_or_exit("chakra/tests/data/chakra.0.et"))]  # fmt: skip
        _ours_fields(files[1][1])  # the first read of the process, not timed
        for label, path in files:
            t0 = time.perf_counter()
            _upstream_fields(path)
            inner = max(1, int(0.5 / (time.perf_counter() - t0)))  # rounds of >= 0.5 s a side
            ours, up = [], []
            for _ in range(repeat):
                t0 = time.perf_counter()
                for _ in range(inner):
                    n = _ours_fields(path)
                t1 = time.perf_counter()
                for _ in range(inner):
                    m = _upstream_fields(path)
                up.append((time.perf_counter() - t1) / inner)
                ours.append((t1 - t0) / inner)
                assert n == m, (n, m)
            ratio = statistics.median(u / o for u, o in zip(up, ours, strict=True))
            print(f"every node's fields, {label} ({n:,} nodes, "
                  f"{path.stat().st_size / 1e6:.1f} MB): read_chakra {statistics.median(ours):.3f} s, "
                  f"mlc-chakra {statistics.median(up):.3f} s, read_chakra is {ratio:.2f}x")  # fmt: skip
            _floor(path, statistics.median(up), repeat)
            cols = best(lambda p=path: _ours_columns(p), repeat)
            print(f"  the same fields as columns (ChakraTrace arrays, names gathered): "
                  f"{cols * 1e3:.1f} ms, {statistics.median(up) / cols:.1f}x mlc-chakra")  # fmt: skip
            _fresh(path, repeat)
        _every_realdata_et(repeat)


def _floor(path: Path, upstream_s: float, repeat: int) -> None:
    """What any reader that hands out a Python object per node pays on ``path`` whatever its
    design, printed beside mlc-chakra's time: reading the file, the benchmark's own access
    loop over objects whose fields are Python values already (plain named tuples: ``list()``
    of the deps, the attribute-name list, ...; lumos's views read their fields on access, so
    a loop over them would count their own cost), and making the Python ints of every id, dep
    and duration (mlc-chakra pays the last two too)."""
    from collections import namedtuple

    trace = read_chakra(path)
    plain = namedtuple("plain", "id name type data_deps ctrl_deps duration_micros attrs")
    plain_attr = namedtuple("plain_attr", "name")
    made = [plain(n.id, n.name, n.type, n.data_deps, n.ctrl_deps, n.duration_micros,
                  tuple(plain_attr(a.name) for a in n.attrs)) for n in trace.iter_nodes()]  # fmt: skip

    def loop() -> None:
        for n in made:
            _ = (n.id, n.name, n.type, list(n.data_deps), list(n.ctrl_deps), n.duration_micros,
                 [a.name for a in n.attrs])  # fmt: skip

    def ints() -> None:
        for col in (trace.node_id, trace.data_deps, trace.ctrl_deps, trace.duration_micros):
            col.tolist()

    read_s = best(lambda: read_chakra(path), repeat)
    loop_s, ints_s = best(loop, repeat), best(ints, repeat)
    floor = read_s + loop_s + ints_s
    print(f"  floor: read {read_s * 1e3:.1f} ms + access loop over made objects "
          f"{loop_s * 1e3:.1f} ms + Python ints {ints_s * 1e3:.1f} ms = {floor * 1e3:.1f} ms; "
          f"at most {upstream_s / floor:.2f}x mlc-chakra with a view per node")  # fmt: skip


def _every_realdata_et(repeat: int) -> None:
    """Every ``.et`` file of the realdata folder (ASTRA-sim's examples, upstream's test ETs),
    read whole by both readers, interleaved; one line with the totals."""
    import statistics

    from tests.realdata import realdata_root

    root = realdata_root()
    if root is None:
        print("realdata folder absent: no realdata ETs")
        return
    paths = sorted(root.rglob("*.et"))
    mb = sum(p.stat().st_size for p in paths) / 1e6
    ours, up = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        n = sum(_ours_fields(p) for p in paths)
        t1 = time.perf_counter()
        m = sum(_upstream_fields(p) for p in paths)
        up.append(time.perf_counter() - t1)
        ours.append(t1 - t0)
        assert n == m, (n, m)
    ratio = statistics.median(u / o for u, o in zip(up, ours, strict=True))
    print(f"every node's fields, all {len(paths)} realdata ETs ({n:,} nodes, {mb:.1f} MB): "
          f"read_chakra {statistics.median(ours):.3f} s, mlc-chakra {statistics.median(up):.3f} s, "
          f"read_chakra is {ratio:.2f}x")  # fmt: skip


_READERS = {"fields": _ours_fields, "columns": _ours_columns, "upstream": _upstream_fields}


def _fresh(path: Path, repeat: int) -> None:
    """Each reader of :data:`_READERS` on ``path`` in a process of its own (``--one``), timed
    after its imports and as a whole process (start, imports, read, exit: what a one-shot
    script costs); ``repeat`` interleaved rounds, medians."""
    import statistics
    import subprocess
    import sys

    times: dict[str, list[float]] = {k: [] for k in _READERS}
    whole: dict[str, list[float]] = {k: [] for k in _READERS}
    for _ in range(repeat):
        for which in _READERS:
            t0 = time.perf_counter()
            out = subprocess.run([sys.executable, __file__, "--one", which, str(path)],
                                 check=True, capture_output=True, text=True)  # fmt: skip
            whole[which].append(time.perf_counter() - t0)
            times[which].append(float(out.stdout))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"  each in a fresh process, timed after the import (medians of {repeat}): "
          f"read_chakra {med['fields']:.3f} s, columns {med['columns']:.3f} s, mlc-chakra "
          f"{med['upstream']:.3f} s: {med['upstream'] / med['fields']:.2f}x per node, "
          f"{med['upstream'] / med['columns']:.2f}x as columns")  # fmt: skip
    w = {k: statistics.median(v) for k, v in whole.items()}
    print(f"  each as a whole process, imports included (medians of {repeat}): read_chakra "
          f"{w['fields']:.3f} s, columns {w['columns']:.3f} s, mlc-chakra {w['upstream']:.3f} s: "
          f"{w['upstream'] / w['fields']:.2f}x per node, {w['upstream'] / w['columns']:.2f}x "
          "as columns")  # fmt: skip


def _one(which: str, path: str) -> None:
    """One read by ``which`` (its imports done first), its seconds printed."""
    if which == "upstream":
        from chakra.schema.protobuf import et_def_pb2  # noqa: F401
        from chakra.src.third_party.utils.protolib import decodeMessage  # noqa: F401
    t0 = time.perf_counter()
    _READERS[which](Path(path))
    print(time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--delay-table", action="store_true")
    ap.add_argument("--realistic", action="store_true")
    ap.add_argument("--one", nargs=2, metavar=("READER", "FILE"), help=argparse.SUPPRESS)
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--upstream-nodes", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if args.delay_table:
        delay_table()
        return
    if args.one:
        _one(*args.one)
        return
    if args.realistic:
        realistic(args.repeat)
        return
    trace = synthetic(args.nodes)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "bench.0.et"
        t_write = best(lambda: write_chakra(trace, path), args.repeat)
        mb = path.stat().st_size / 1e6
        t_read = best(lambda: read_chakra(path), args.repeat)
        t_comm = best(lambda: read_chakra(path).comm, 1)
        n = args.nodes
        print(f"file: {n:,} nodes, {mb:.1f} MB")
        print(
            f"write_chakra: {n / t_write:12,.0f} nodes/s  {mb / t_write:8.1f} MB/s  ({t_write:.2f} s)"
        )
        print(
            f"read_chakra : {n / t_read:12,.0f} nodes/s  {mb / t_read:8.1f} MB/s  ({t_read:.2f} s)"
        )
        print(f"read + comm columns: {n / t_comm:12,.0f} nodes/s")
        for extract in (False, True):
            up = upstream_rate(path, args.upstream_nodes, extract)
            if up is None:
                print("mlc-chakra not installed: no upstream comparison")
                break
            what = "parse + field access" if extract else "parse only"
            print(f"mlc-chakra protolib reader ({what}): {up:,.0f} nodes/s "
                  f"(first {args.upstream_nodes:,} nodes); read_chakra is {n / t_read / up:.1f}x")  # fmt: skip
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS: {peak:.0f} MB")


if __name__ == "__main__":
    main()
