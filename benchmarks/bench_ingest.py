"""Kineto ingest speed and memory: MB/s of uncompressed JSON and peak memory, end to end.

Run on demand (not a test):  python benchmarks/bench_ingest.py [TRACE ...]
Default trace: HTA's ``df_index_resolver.json.gz`` (V100, 216k events), read in place from the
realdata folder (``LUMOS_REALDATA`` or ``../shared/realdata``; see ``tests/REALDATA.md``).
Prints, per file: uncompressed MB, best-of-N wall time for ``read_kineto`` (gunzip included) and
for the JSON parse alone, MB/s for both, and peak traced memory as a multiple of the JSON size.
"""

from __future__ import annotations

import argparse
import gzip
import json
import tracemalloc
from pathlib import Path

from _realdata import trace_or_exit
from _timing import best_of
from lumos.ingest.kineto import read_kineto, trace_from_bytes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("traces", nargs="*", type=Path)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    for path in args.traces or [trace_or_exit("v100_stream_wait_event")]:
        raw = path.read_bytes()
        payload = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
        mb = len(payload) / 1e6
        t_read = best_of(lambda p=path: read_kineto(p), args.repeat)[0]
        t_mem = best_of(lambda b=payload: trace_from_bytes(b, "bench"), args.repeat)[0]
        t_json = best_of(lambda b=payload: json.loads(b), max(1, args.repeat // 2))[0]
        tracemalloc.start()
        trace = read_kineto(path)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(f"{path.name}: {mb:.1f} MB JSON, {trace.num_raw_events} events")
        print(f"  read_kineto (file, gunzip incl.) {t_read:6.3f} s  {mb / t_read:7.1f} MB/s")
        print(f"  read_kineto (bytes in memory)    {t_mem:6.3f} s  {mb / t_mem:7.1f} MB/s")
        print(
            f"  json.loads alone (reference)     {t_json:6.3f} s  {mb / t_json:7.1f} MB/s"
            f"  -> lumos is {t_json / t_read:.1f}x json.loads"
        )
        print(f"  peak memory {peak / 1e6:7.1f} MB = {peak / len(payload):.2f}x the JSON size")


if __name__ == "__main__":
    main()
