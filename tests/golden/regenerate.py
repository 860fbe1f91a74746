"""Write the golden end-to-end outputs that tests compare against (run on purpose only):

    python -m tests.golden.regenerate

Each golden file is the output of one CLI command on a realdata trace, with the machine-specific
``sources`` replaced. Tests read these files and never write them; review the diff before
committing a regenerated file, it is a change of lumos's behaviour.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

from tests.realdata import TRACES, realdata_or_exit

from lumos.cli.main import main as lumos_main

GOLDEN = Path(__file__).parent


def replay_golden(trace: Path) -> str:
    """``lumos replay TRACE`` -> replay.json text as the golden test compares it."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        if lumos_main(["replay", str(trace), "-o", str(out)]) != 0:
            raise SystemExit(f"lumos replay {trace} failed")
        doc = json.loads((out / "replay.json").read_text())
    doc["sources"] = ["<trace>"]
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def replay_digests(trace: Path) -> str:
    """``lumos replay TRACE`` -> the SHA-256 and size of each file it writes (replay.json with
    its ``sources`` replaced), as JSON: outputs too big to keep, kept byte for byte."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        if lumos_main(["replay", str(trace), "-o", str(out)]) != 0:
            raise SystemExit(f"lumos replay {trace} failed")
        files = {p.name: p.read_bytes() for p in sorted(out.iterdir())}
    files["replay.json"] = files["replay.json"].replace(str(trace).encode(), b"<trace>")
    doc = {n: {"sha256": hashlib.sha256(b).hexdigest(), "bytes": len(b)} for n, b in files.items()}
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def main() -> int:
    trace = realdata_or_exit(TRACES["cuda_event_sync"])
    target = GOLDEN / "replay_cuda_event_sync.json"
    target.write_text(replay_golden(trace))
    print(f"wrote {target}", file=sys.stderr)
    target = GOLDEN / "replay_dlrm_8rank.sha256.json"
    target.write_text(replay_digests(realdata_or_exit(TRACES["dlrm_kineto_8rank"])))
    print(f"wrote {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
