"""Benchmark: PyTorch ET ingest (MB/s, nodes/s, peak memory) and ET<->Kineto link speed.

Usage::

    python benchmarks/bench_et.py [ET_FILE[::MEMBER] ...] [--repeat 3]
                                  [--link-et ET --link-kineto KINETO]

With no ET file it reads param's ``resnet_2gpu_et.json.gz`` (schema 1.1.0) in place from the
realdata folder (``LUMOS_REALDATA`` or ``../shared/realdata``; see ``tests/REALDATA.md``);
pass e.g. param's ``hf_GPT2_et.json.tar.gz`` (27k nodes) for a stress run. Throughput is measured
on the *uncompressed* JSON, from bytes in memory (decompression excluded), best of ``--repeat``,
against ``json.loads`` (and ``orjson.loads`` when installed) of the same bytes, which only parse
and build Python objects. Peak memory is the tracemalloc peak of one read (Python allocations,
numpy included) as a multiple of the JSON size. The link part times ``link()`` per rank on
param's 8-rank DLRM pair (sequence alignment, realdata) unless other files are given.
"""

from __future__ import annotations

import argparse
import gc
import json
import tarfile
import time
import tracemalloc

from _realdata import trace_or_exit
from lumos._io import read_bytes
from lumos.ingest.kineto import read_kineto
from lumos.ingest.pytorch_et import _parse, read_pytorch_et
from lumos.link import link


def _payload(spec: str) -> tuple[str, bytes]:
    path, _, member = spec.partition("::")
    raw = read_bytes(path, member or None)
    if not member and raw[257:262] == b"ustar":
        import io

        with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
            m = next(x for x in tar.getmembers() if x.name.endswith(".json"))
            f = tar.extractfile(m)
            assert f is not None
            raw = f.read()
    return spec, raw


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def bench_ingest(spec: str, repeat: int) -> None:
    where, raw = _payload(spec)
    mb = len(raw) / 1e6
    dt = _best(lambda: _parse(where, raw), repeat)
    trace = _parse(where, raw)
    print(f"{where}: {mb:.1f} MB JSON, {trace.num_nodes:,} nodes, schema {trace.schema}")
    print(
        f"  read_pytorch_et: {dt * 1e3:.0f} ms = {mb / dt:.0f} MB/s, "
        f"{trace.num_nodes / dt:,.0f} nodes/s"
    )
    dj = _best(lambda: json.loads(raw), repeat)
    print(f"  json.loads:      {dj * 1e3:.0f} ms = {mb / dj:.0f} MB/s  (ratio {dj / dt:.2f}x)")
    try:
        import orjson  # type: ignore[import-not-found]

        do = _best(lambda: orjson.loads(raw), repeat)
        print(f"  orjson.loads:    {do * 1e3:.0f} ms = {mb / do:.0f} MB/s  (ratio {do / dt:.2f}x)")
    except ImportError:
        pass
    gc.collect()
    tracemalloc.start()
    t = _parse(where, raw)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    kept = t.io_blob.__sizeof__() + sum(
        a.nbytes for a in (t.node_id, t.parent_idx, t.name_idx, t.io_spans, t.rf_id, t.tid)
    )
    print(
        f"  peak allocations {peak / 1e6:.0f} MB = {peak / len(raw):.2f}x JSON; "
        f"trace keeps ~{kept / 1e6:.1f} MB"
    )


def bench_link(pairs: list[tuple[str, str | None, str, str | None]], repeat: int) -> None:
    total_ops = total_linked = 0
    total_t = 0.0
    for et, et_m, kin, kin_m in pairs:
        host = read_pytorch_et(et, et_m)
        kt = read_kineto(kin, kin_m)
        dt = _best(lambda host=host, kt=kt: link(host, kt), repeat)
        rep = link(host, kt).report
        total_ops += rep.num_et_ops
        total_linked += rep.num_linked
        total_t += dt
        print(
            f"  rank {rep.rank}: {rep.num_linked}/{rep.num_et_ops} linked "
            f"({100 * rep.match_rate:.1f} %), {len(kt.events):,} Kineto events, {dt * 1e3:.0f} ms"
        )
    print(
        f"  link total: {total_linked}/{total_ops} ops in {total_t:.2f} s = "
        f"{total_ops / total_t:,.0f} ET ops/s"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("et", nargs="*", help="ET files (path or path::member)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--link-et", help="ET file to link (default: param's DLRM, 8 ranks)")
    ap.add_argument("--link-kineto", help="Kineto file to link")
    args = ap.parse_args()
    print("== ingest")
    for spec in args.et or [str(trace_or_exit("et_1.1.0"))]:
        bench_ingest(spec, args.repeat)
    print("== link")
    if args.link_et and args.link_kineto:
        pairs: list[tuple[str, str | None, str, str | None]] = [
            (args.link_et, None, args.link_kineto, None)
        ]
    else:
        dlrm_et, dlrm_kineto = trace_or_exit("dlrm_et_8rank"), trace_or_exit("dlrm_kineto_8rank")
        with tarfile.open(dlrm_kineto) as tar:
            kin = sorted(m.name for m in tar.getmembers() if m.name.endswith(".json"))
        pairs = [
            (
                str(dlrm_et),
                f"dlrm_pytorch_et/dlrm_eg_{r}.json",
                str(dlrm_kineto),
                next(m for m in kin if f"/worker{r}_" in m),
            )
            for r in range(8)
        ]
    link(read_pytorch_et(pairs[0][0], pairs[0][1]), read_kineto(pairs[0][2], pairs[0][3]))
    bench_link(pairs, args.repeat)


if __name__ == "__main__":
    main()
