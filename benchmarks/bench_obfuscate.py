"""Obfuscation and leak-check speed on a large Kineto trace: MB/s per phase.

Run on demand (not a test):  python benchmarks/bench_obfuscate.py [TRACE ...] [--repeat N]
Default trace: HTA's ``df_index_resolver.json.gz`` (V100, 216k events, 54 MB of JSON), read in
place from the realdata folder (``LUMOS_REALDATA`` or ``../shared/realdata``).
Prints, per file and phase, the best-of-N wall time and MB/s of uncompressed JSON: the input's
strings (``kineto_strings``), its secrets (``secrets_of``), the obfuscation itself, and the leak
scan of the output (``find_leak``, MB of output JSON), plus the secrets count.
"""

from __future__ import annotations

import argparse
import gzip
from pathlib import Path

import msgspec

from _realdata import trace_or_exit
from _timing import best_of
from lumos.synth.leaks import find_leak, secrets_of
from lumos.synth.obfuscate_kineto import kineto_strings, obfuscate_kineto
from lumos.synth.obfuscate_names import Namer


def bench_file(path: Path, repeat: int) -> None:
    """Time each phase on one trace and print the figures."""
    raw = path.read_bytes()
    payload = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    mb = len(payload) / 1e6
    doc = msgspec.json.decode(payload)
    t_str, strings = best_of(lambda: kineto_strings(doc, payload), repeat)
    t_sec, secrets = best_of(lambda: secrets_of(strings), repeat)
    t_obf, (out, _) = best_of(lambda: obfuscate_kineto(doc, Namer("bench")), repeat)
    t_scan, leak = best_of(lambda: find_leak(out, secrets), repeat)
    out_mb = len(out) / 1e6
    print(f"{path.name}: {mb:.1f} MB JSON in, {out_mb:.1f} MB out, {len(secrets)} secrets, "
          f"leak {leak!r}")  # fmt: skip
    for label, t, size in (("input strings", t_str, mb), ("secrets", t_sec, mb),
                           ("obfuscate", t_obf, mb), ("leak scan", t_scan, out_mb)):  # fmt: skip
        print(f"  {label:14s} {t:7.2f} s  {size / t:8.1f} MB/s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("traces", nargs="*", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    for path in args.traces or [trace_or_exit("v100_stream_wait_event")]:
        bench_file(path, args.repeat)


if __name__ == "__main__":
    main()
