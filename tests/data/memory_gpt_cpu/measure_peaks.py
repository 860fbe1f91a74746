"""Each run's recorded memory peak, read straight from its Kineto JSON (no lumos code):
per rank and ProfilerStep, the largest "Total Allocated" of the host's [memory] events inside the
step's window, or the level the step starts at (before the first event: that event's total less
its bytes); the run's peak is the largest of them.

    python tests/data/memory_gpt_cpu/measure_peaks.py RUN_DIR... > measured_peaks.json
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path


def run_peak(run: Path) -> int:
    best = 0
    for f in sorted(run.glob("rank*.kineto.json.gz")):
        events = json.loads(gzip.decompress(f.read_bytes()))["traceEvents"]
        host = [
            e for e in events if e.get("name") == "[memory]" and e["args"].get("Device Type") == 0
        ]
        host.sort(key=lambda e: e["ts"])
        mem = [(e["ts"], e["args"]["Total Allocated"]) for e in host]
        # allocated before the first event: its total less its bytes
        first = host[0]["args"]["Total Allocated"] - host[0]["args"]["Bytes"] if host else 0
        for s in (e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")):
            lo, hi = s["ts"], s["ts"] + s["dur"]
            inside = [v for t, v in mem if lo <= t <= hi]
            before = [v for t, v in mem if t < lo]
            start = before[-1] if before else first
            best = max(best, *inside, start)
    return best


if __name__ == "__main__":
    print(json.dumps({Path(p).name: run_peak(Path(p)) for p in sys.argv[1:]}, indent=1))
