"""The pipeline edits of :func:`~lumos.estimate.reshape.reshape_workload`, each with its record:
more stages (:mod:`lumos.estimate.stages`), fewer (:mod:`lumos.estimate.merge`), and the
interleaved schedule (:mod:`lumos.estimate.interleave`)."""

from __future__ import annotations

from collections.abc import Sequence

from lumos.errors import ConfigError
from lumos.estimate.edit import Edit
from lumos.estimate.interleave import interleave
from lumos.estimate.layers import LayerMap
from lumos.estimate.merge import merge_stages
from lumos.estimate.stages import restage
from lumos.graph.build_gloo import on_lanes
from lumos.graph.model import Workload

__all__ = ["interleave_edit", "merge_edit", "refuse_sends_in_flight", "split_edit"]


def refuse_sends_in_flight(workload: Workload) -> None:
    """A ConfigError when some rank sent or received while going on (its sends on lanes,
    :mod:`lumos.graph.build_gloo`): the micro-batch, schedule and stage edits move blocking
    sends and receives only."""
    lanes = [g.rank for g in workload.graphs if on_lanes(g).any()]
    if lanes:
        raise ConfigError(
            "micro-batch, schedule and stage what-ifs move a pipeline's blocking sends and "
            f"receives; rank(s) {', '.join(map(str, lanes))} sent or received while going on "
            "(asynchronous isend/irecv, as torch.distributed.pipelining issues them), which "
            "these edits do not move yet"
        )


def _added(before: Workload, after: Workload) -> int:
    return sum(g.num_tasks for g in after.graphs) - sum(g.num_tasks for g in before.graphs)


def split_edit(
    workload: Workload, maps: Sequence[LayerMap], pp: tuple[int, int], layers: tuple[int, int]
) -> tuple[Workload, Edit]:
    """``pp = (old, new)`` stages, ``layers = (old, new)``: each stage split (``new`` a
    multiple of ``old``)."""
    out, st = restage(workload, maps, layers[1], pp[1])
    return out, Edit(
        name=f"pp {pp[0]} -> {pp[1]}"
        + (f", layers {layers[0]} -> {layers[1]}" if layers[1] != layers[0] else ""),
        tasks_added=_added(workload, out),
        tasks_retimed=st["tasks_zeroed"] + st["messages_added"],
        model="each stage split into copies holding layers / pp layers each",
        detail=f"{st['messages_added']} messages at the new stage boundaries (the trace's "
        f"median transfer); {st['tasks_zeroed']} tasks of the embedding and head kept with no "
        "time on the stages that no longer run them",
    )


def merge_edit(
    workload: Workload, maps: Sequence[LayerMap], pp: tuple[int, int]
) -> tuple[Workload, Edit]:
    """``pp = (old, new)`` stages, ``new`` a divisor of ``old``: neighbours merged."""
    out, st = merge_stages(workload, maps, pp[1])
    return out, Edit(
        name=f"pp {pp[0]} -> {pp[1]}",
        tasks_retimed=st["messages_local"],
        model=f"{pp[0] // pp[1]} neighbouring stages on one rank, micro-batch by micro-batch",
        detail=f"{st['messages_local']} messages between merged stages made local",
    )


def interleave_edit(
    workload: Workload, maps: Sequence[LayerMap], layers: int, chunks: int
) -> tuple[Workload, Edit]:
    """The interleaved schedule with ``chunks`` model chunks per rank."""
    out, st = interleave(workload, maps, layers, chunks)
    return out, Edit(
        name=f"schedule interleaved, {chunks} chunks per rank",
        tasks_added=_added(workload, out),
        tasks_retimed=st["tasks_zeroed"] + st["messages_added"],
        model="stages split into virtual stages, each rank's chunks merged in the interleaved "
        "1F1B order",
        detail=f"{st['messages_added']} messages at the new virtual stage boundaries; "
        f"{st['sends_batched']} sends issued without blocking",
    )
