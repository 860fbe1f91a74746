"""A multi-rank run on disk for the tests: the 8-rank DLRM job's traces replicated (``tmp_path``).

Rank ``r + 8k`` is rank ``r``'s trace with its ``distributedInfo`` rank and world size
rewritten, as a replicated or lockstep job records them; ``jitter`` also makes the first
kernel of copy ``k`` last ``k`` microseconds longer, so that copies are distinct traces (no
build to share) that simulate to other times.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.realdata import trace

from lumos.ingest.detect import expand_paths

_INFO = re.compile(rb'("rank"\s*:\s*)(\d+)(,\s*"world_size"\s*:\s*)(\d+)')
_DUR = re.compile(rb'"dur"\s*:\s*(\d+)')


def write_replicated(dest: Path, ranks: int, *, jitter: bool = False) -> Path:
    """``dest`` holding ``ranks`` Kineto traces (a multiple of 8); returns ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    base = [r.read() for r in expand_paths([trace("dlrm_kineto_8rank")]) if r.kind == "kineto"]
    for k in range(ranks // len(base)):
        for data in base:
            m = _INFO.search(data, data.index(b'"distributedInfo"'))
            assert m is not None
            rank = int(m.group(2)) + len(base) * k
            out = data[: m.start(2)] + b"%d" % rank + m.group(3) + b"%d" % ranks + data[m.end(4) :]
            if jitter and k:
                d = _DUR.search(out, out.index(b'"cat": "kernel"'))
                assert d is not None
                out = out[: d.start(1)] + b"%d" % (int(d.group(1)) + k) + out[d.end(1) :]
            (dest / f"rank{rank:03d}.json").write_bytes(out)
    return dest
