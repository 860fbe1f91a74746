"""Model files and sample outputs: the edges of ``lumos synth fit`` and ``lumos synth sample``.

A model file is the JSON :func:`lumos.synth.fit.fit_model` returns, written with sorted keys
(the same traces give the same bytes). :func:`read_model` checks its format and version and
names the file in every error.

Samples are written as Chakra ETs, ``<prefix>.<rank>.et``, and ``<prefix>.sample.json`` saying
what was drawn. A sample of up to :data:`STAMP_LIMIT_TASKS` tasks is simulated as a whole first,
so its nodes carry start times (a reader, lumos included, takes each collective's waiting for
peers from them, as from a recording). A larger one is written in parallel processes, each
rank drawn, converted and written on its own (memory stays at one rank per worker), without
start times. ``--target astra-sim`` needs every rank at once (collectives are ordered across
ranks) and goes through :func:`lumos.convert_astra.write_astra`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from lumos._io import atomic_write
from lumos.errors import InputError
from lumos.synth.fit import MODEL_FORMAT, MODEL_VERSION
from lumos.synth.sample import Plan, sample_rank, sample_workload, structure, structures

__all__ = ["read_model", "write_model", "write_sample"]

_NEEDED = ("classes", "durations", "delays", "waits", "members", "fitted_on")


def write_model(model: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write ``model`` as JSON, atomically; returns the path."""
    with atomic_write(path) as f:
        json.dump(model, f, sort_keys=True, separators=(",", ":"))
        f.write("\n")
    return Path(path)


def read_model(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A model file, checked: its format, version and the sections sampling needs."""
    where = str(path)
    try:
        with open(path, encoding="utf-8") as f:
            model = json.load(f)
    except OSError as exc:
        raise InputError(where, f"cannot read the model: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(where, f"not a lumos synth model (not JSON: {exc})") from None
    if not isinstance(model, dict) or model.get("format") != MODEL_FORMAT:
        raise InputError(where, f'not a lumos synth model (no "format": "{MODEL_FORMAT}")')
    if model.get("version") != MODEL_VERSION:
        raise InputError(where, f"model version {model.get('version')} is not the version "
                         f"{MODEL_VERSION} this lumos reads; fit it again")  # fmt: skip
    missing = [k for k in _NEEDED if k not in model]
    if missing or not model["members"]:
        raise InputError(where, f"the model lacks {', '.join(missing) or 'members'}")
    problem = _shape_problem(model)
    if problem:
        raise InputError(where, f"not a valid version {MODEL_VERSION} model: {problem}")
    return model


def _shape_problem(model: Mapping[str, Any]) -> str | None:
    """What is malformed in a model's layout (None when nothing): the parts sampling indexes."""
    from lumos.synth.sketch import POINTS

    for name in ("durations", "delays", "waits"):
        t = model[name]
        if not isinstance(t, dict) or not {"key", "count", "points"} <= set(t):
            return f"{name} is not a sketch table"
        if any(len(p) != 2 * POINTS - 1 for p in t["points"]):
            return f"{name} holds sketches of another length than {2 * POINTS - 1}"
    for i, m in enumerate(model["members"]):
        if not isinstance(m, dict) or not {"config", "ranks", "rank_class", "skeletons",
                                           "world_size", "groups"} <= set(m):  # fmt: skip
            return f"member {i} lacks config, ranks, rank classes or skeletons"
        classes = m["skeletons"]
        if not all(isinstance(c, list) and c and all(isinstance(v, dict) for v in c)
                   for c in classes):  # fmt: skip
            return f"member {i}: each rank class must be a list of step variants"
        if len(m["rank_class"]) != len(m["ranks"]) or any(
            not 0 <= k < len(classes) for k in m["rank_class"]
        ):
            return f"member {i}: rank classes do not match its skeletons"
    return None


#: Samples up to this many tasks (all ranks) are simulated together before writing, so that
#: their ETs carry start times a reader derives collective waits from, like a recording.
STAMP_LIMIT_TASKS = 4_000_000


def _write_ranks(job: tuple[Plan, list[int], str]) -> list[tuple[int, str, int]]:
    from lumos.chakra.io import write_chakra
    from lumos.chakra.mapping import to_chakra

    plan, ranks, prefix = job
    shapes: dict[int, Any] = {}
    out = []
    for r in ranks:
        cls = plan.class_of(r)
        if cls not in shapes:
            shapes[cls] = structure(plan, cls)
        trace = to_chakra(sample_rank(plan, r, shapes[cls]))
        path = f"{prefix}.{r}.et"
        write_chakra(trace, path)
        out.append((r, path, trace.num_nodes))
    return out


def write_sample(
    plan: Plan,
    prefix: str | os.PathLike[str],
    *,
    target: str = "chakra",
    workers: int | None = None,
    dask_address: str | None = None,
    on_done: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Write the sample ``plan`` describes under ``prefix``; returns (and writes as
    ``<prefix>.sample.json``) what was written."""
    from lumos.parallel import default_workers, map_ranks

    prefix = str(prefix)
    Path(prefix).parent.mkdir(parents=True, exist_ok=True)
    m = plan.model["members"][plan.member]
    shapes = structures(plan)  # once: they size the sample and serve the in-memory paths
    if target == "astra-sim":
        from lumos.convert_astra import write_astra

        rep = write_astra(sample_workload(plan, timestamps=False, shapes=shapes), prefix)
        files = [(r.rank, r.output, r.nodes) for r in rep.ranks]
        extra: dict[str, Any] = {"network": rep.network, "configs": list(rep.configs)}
    elif sum(shapes[plan.class_of(r)].num_tasks for r in plan.ranks) <= STAMP_LIMIT_TASKS:
        from lumos.chakra.io import write_chakra
        from lumos.chakra.mapping import to_chakra

        files = []
        for i, g in enumerate(sample_workload(plan, shapes=shapes).graphs):
            trace = to_chakra(g)
            write_chakra(trace, f"{prefix}.{g.rank}.et")
            files.append((g.rank, f"{prefix}.{g.rank}.et", trace.num_nodes))
            if on_done:
                on_done(i)
        extra = {"timestamps": "simulated"}
    else:
        n = max(1, default_workers() if workers is None else workers)
        ranks = list(plan.ranks)
        size = max(1, -(-len(ranks) // (4 * n)))
        jobs = [(plan, ranks[i : i + size], prefix) for i in range(0, len(ranks), size)]

        def chunk_done(i: int) -> None:
            for r in jobs[i][1] if on_done else ():
                on_done(r)  # type: ignore[misc]

        parts = map_ranks(_write_ranks, jobs, workers=workers, dask_address=dask_address,
                          on_done=chunk_done)  # fmt: skip
        files = [f for part in parts for f in part]
        extra = {"timestamps": "none: too many tasks to simulate together; a reader estimates "
                 "each collective's waiting from durations alone"}  # fmt: skip
    summary = {
        "target": target,
        "config": {**m["config"], **({"layers": plan.layers} if plan.layers else {})},
        "member": plan.member,
        "world_size": plan.world_size,
        "ranks": len(plan.ranks),
        "steps": plan.steps,
        "seed": plan.seed,
        "files": [{"rank": r, "path": p, "nodes": k} for r, p, k in files],
        **extra,
    }
    with atomic_write(f"{prefix}.sample.json") as f:
        json.dump(summary, f, indent=1, sort_keys=True)
        f.write("\n")
    return summary
