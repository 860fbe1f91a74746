"""``lumos replay`` of the 8-rank DLRM job writes the same files, byte for byte, as before the
multi-rank fast paths: digests in tests/golden (``python -m tests.golden.regenerate``, run with
the code before them)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.golden.regenerate import replay_digests
from tests.realdata import trace

GOLDEN = Path(__file__).parent.parent / "golden" / "replay_dlrm_8rank.sha256.json"


def test_dlrm_8rank_outputs_byte_for_byte() -> None:
    got = json.loads(replay_digests(trace("dlrm_kineto_8rank")))
    assert got == json.loads(GOLDEN.read_text())
