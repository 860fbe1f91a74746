"""``lumos replay --chakra-only``: replay Chakra ETs as ASTRA-sim would, ignoring lumos's own
metadata (:mod:`lumos.chakra.slots`).

The network is ``network.yml`` + ``system.json`` of ``network_dir``, else of the ETs' own
directory when they are there (what ``lumos convert --target astra-sim`` writes); without one,
collectives last their ``duration_micros`` (``collective_without_network`` in the diagnostics). ``replay.json`` has the
shape of every replay (``steps[]`` with ``name``, ``measured_ns``, ``predicted_ns``, one
entry per rank under ``ranks[]``): an ET has no steps, so each rank has one step, ``"et"``,
whose ``predicted_ns`` is the rank's finish time (ASTRA-sim's "sys[r] finished, N cycles") and
``measured_ns`` null. ``completed`` is false, and ``stalls`` says where, when some rank never
finishes (ASTRA-sim would stall there too).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lumos._io import atomic_outputs, atomic_write
from lumos.chakra.io import read_chakra
from lumos.chakra.slots import simulate_slots
from lumos.chakra.trace import ChakraTrace, ChakraWorkload
from lumos.cost.astra_files import AstraNetwork, read_astra_network
from lumos.errors import ConfigError

__all__ = ["replay_chakra_only", "write_chakra_replay"]


def _load(paths: Sequence[str | os.PathLike[str]]) -> dict[int, ChakraTrace]:
    out: dict[int, ChakraTrace] = {}
    for p in paths:
        data = read_chakra(p)
        items = list(data) if isinstance(data, ChakraWorkload) else [data]
        for i, t in enumerate(items):
            rank = t.rank if t.rank is not None else len(out) + i
            if rank in out:
                raise ConfigError(f"two ETs for rank {rank}: {out[rank].path} and {t.path}")
            out[rank] = t
    if not out:
        raise ConfigError("no Chakra ET to replay")
    return out


def _network(traces: dict[int, ChakraTrace], network_dir: str | None) -> AstraNetwork | None:
    if network_dir is not None:
        return read_astra_network(network_dir)
    first = next(iter(traces.values()))
    here = Path(first.path).parent if first.path else None
    if here is not None and (here / "network.yml").is_file():
        return read_astra_network(here)
    return None


def replay_chakra_only(
    paths: Sequence[str | os.PathLike[str]], *, network_dir: str | None = None
) -> dict[str, Any]:
    """The ``replay.json`` document of the ETs under ``paths`` (module docstring)."""
    traces = _load(paths)
    network = _network(traces, network_dir)
    res = simulate_slots(traces, network)
    ranks = []
    for r in res.ranks:
        finish = res.finish_ns[r]
        ranks.append({"rank": r, "source": traces[r].path, "finish_ns": finish,
                      "steps": [{"name": "et", "measured_ns": None, "predicted_ns": finish}]})  # fmt: skip
    doc: dict[str, Any] = {
        "mode": "chakra-only",
        "sources": [str(p) for p in paths],
        "network": None if network is None else network.to_dict(),
        "completed": res.completed,
        "stalls": list(res.stalls),
        "diagnostics": res.diagnostics.to_dict(),
    }
    return {**doc, **ranks[0], "ranks": ranks}


def write_chakra_replay(doc: dict[str, Any], out_dir: str | os.PathLike[str]) -> Path:
    """Write ``replay.json`` into ``out_dir`` (atomically)."""
    with atomic_outputs(out_dir, "replay.json") as tmp, atomic_write(tmp / "replay.json") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    return Path(out_dir) / "replay.json"
