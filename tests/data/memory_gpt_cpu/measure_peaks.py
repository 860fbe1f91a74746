"""Each run's recorded memory peak, read straight from its Kineto JSON (no lumos code):
per rank and ProfilerStep, the largest "Total Allocated" of the training device's [memory] events
(the GPU's where there are any, else the host's) inside the
step's window, or the level the step starts at (before the first event: that event's total less
its bytes); the run's peak is the largest of them.

    python tests/data/memory_gpt_cpu/measure_peaks.py RUN_DIR... > measured_peaks.json

(one GPU per rank: a job whose ranks each drive several GPUs is not what this reads)
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path


def run_peak(run: Path) -> dict[str, object]:
    """``{"peak": the largest over ranks, "ranks": [each rank's, by rank file]}``."""
    per_rank = []
    for f in sorted(run.glob("rank*.kineto.json.gz")):
        best = 0
        events = json.loads(gzip.decompress(f.read_bytes()))["traceEvents"]
        mem_events = [e for e in events if e.get("name") == "[memory]"]
        gpu = [e for e in mem_events if e["args"].get("Device Type") in (1, 6)]
        host = gpu or [e for e in mem_events if e["args"].get("Device Type") == 0]
        host.sort(key=lambda e: e["ts"])
        mem = [(e["ts"], e["args"]["Total Allocated"]) for e in host]
        # allocated before the first event: its total less its bytes
        first = host[0]["args"]["Total Allocated"] - host[0]["args"]["Bytes"] if host else 0
        steps = [
            e
            for e in events
            if str(e.get("name", "")).startswith("ProfilerStep#")
            and e.get("cat") != "gpu_user_annotation"
        ]  # the host's spans, not the GPU's
        for s in steps:
            lo, hi = s["ts"], s["ts"] + s["dur"]
            inside = [v for t, v in mem if lo <= t <= hi]
            before = [v for t, v in mem if t < lo]
            start = before[-1] if before else first
            best = max(best, *inside, start)
        per_rank.append(best)
    return {"peak": max(per_rank), "ranks": per_rank}


if __name__ == "__main__":
    print(json.dumps({Path(p).name: run_peak(Path(p)) for p in sys.argv[1:]}, indent=1))
