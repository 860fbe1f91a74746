"""The merged host+device trace: a PyTorch ET whose ops carry Kineto timing and whose GPU work
hangs under the op that launched it, the file upstream's ``chakra_trace_link`` writes for its
PyTorch converter.

:func:`merge_host_device` takes a :class:`~lumos.link.et_kineto.LinkedTrace` and the ET's JSON
object (as :func:`lumos.ingest.pytorch_et.read_et_document` returns it) and returns a new object;
the input is not modified. What changes, node by node:

=====================  ==========================================================================
field                  value
=====================  ==========================================================================
``id``                 renumbered in the original id order, each op's GPU nodes right after it
                       (so a depth-first walk by id meets kernels in launch order)
``ctrl_deps``,         the renumbered id of the same node (so are ``fw_parent`` and an
``parent``             ``fw_parent`` attribute)
``ts``                 linked ops only: the Kineto op's start, microseconds on Kineto's clock
``inclusive_dur``      linked ops only: its duration (microseconds)
``exclusive_dur``      linked ops only: minus its child ops on the same thread (microseconds)
``inter_thread_dep``   linked ops only: ``null`` (lumos's graph finds inter-thread edges itself)
=====================  ==========================================================================

Each GPU activity (kernel, memcpy, memset) whose launch sits inside a linked op becomes a new
node after that op: a copy of the op (inputs, outputs, attributes) with ``ctrl_deps`` (and
``parent`` where the op has one) naming the op, ``cat`` (``kernel``, ``gpu_memcpy``,
``gpu_memset``), ``name`` (the kernel's), ``ph`` "X", ``ts``, ``inclusive_dur`` =
``exclusive_dur`` (its recorded duration) and ``stream``. GPU nodes of one op are in start order.
Activities with no linked op around their launch are left out and counted
(``MergeSummary.gpu_unattributed``). Times are the recorded ones; where the ET and Kineto trace
come from different iterations (ops aligned by sequence), they are that iteration's.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np

from lumos.errors import InputError
from lumos.ingest.kineto_schema import Category
from lumos.link.et_kineto import LinkedTrace
from lumos.link.host_device import GPU_ACTIVITY, OP_CATEGORIES

__all__ = ["MergeSummary", "merge_host_device"]

_CAT_NAMES = {
    Category.KERNEL: "kernel",
    Category.MEMCPY: "gpu_memcpy",
    Category.MEMSET: "gpu_memset",
}


@dataclass(frozen=True, slots=True)
class MergeSummary:
    """What :func:`merge_host_device` wrote: ``host_nodes`` (the ET's), ``timed_nodes`` (those
    given Kineto timing), ``gpu_nodes`` (added, by ``cat``), ``gpu_unattributed`` (GPU
    activities under no linked op, left out)."""

    host_nodes: int
    timed_nodes: int
    gpu_nodes: dict[str, int]
    gpu_unattributed: int

    @property
    def num_nodes(self) -> int:
        """Nodes in the merged file."""
        return self.host_nodes + sum(self.gpu_nodes.values())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"host_nodes": self.host_nodes, "timed_nodes": self.timed_nodes,
                "gpu_nodes": dict(self.gpu_nodes), "gpu_unattributed": self.gpu_unattributed,
                "num_nodes": self.num_nodes}  # fmt: skip


def _us(ns: int) -> int | float:
    """Microseconds as Kineto writes them: an integer when whole, else with the ns fraction."""
    return ns // 1000 if ns % 1000 == 0 else ns / 1000


def _exclusive_ns(linked: LinkedTrace) -> np.ndarray:
    """Each op's duration less its direct child ops' (children never overlap on one thread)."""
    ev = linked.kineto.events
    is_op = linked.kineto.mask(*OP_CATEGORIES)
    parent = linked.host_device.enclosing_op_idx
    child = np.flatnonzero(is_op & (parent >= 0))
    inner = np.zeros(len(ev), dtype=np.int64)
    np.add.at(inner, parent[child], ev.dur_ns[child])
    return np.maximum(ev.dur_ns - inner, 0)


def _remap(value: Any, new_id: dict[int, int]) -> Any:
    if isinstance(value, list):
        return [_remap(v, new_id) for v in value]
    if type(value) is int:
        return new_id.get(value, value)
    return value


def merge_host_device(
    linked: LinkedTrace, document: dict[str, Any]
) -> tuple[dict[str, Any], MergeSummary]:
    """The merged host+device ET of one rank (see the module docstring) and what it holds.

    ``document`` must be the JSON object of ``linked.host``; an ET that is already linked (has
    GPU nodes) is refused with :class:`~lumos.errors.InputError`.
    """
    host = linked.host
    raw_nodes = document.get("nodes")
    if not isinstance(raw_nodes, list):
        raise InputError(host.path, "not a PyTorch Execution Trace (no top-level 'nodes' list)")
    if host.device_nodes or any(isinstance(n, dict) and "cat" in n for n in raw_nodes):
        raise InputError(host.path, "already a linked host+device trace (it has GPU nodes)")
    nodes = sorted(raw_nodes, key=lambda n: n["id"])
    if len(nodes) != host.num_nodes or any(
        n["id"] != i for n, i in zip(nodes, host.node_id.tolist(), strict=True)
    ):
        raise InputError(host.path, "the JSON object is not the ET that was linked")

    kin = linked.kineto
    ev = kin.events
    exclusive = _exclusive_ns(linked)
    gpu = np.flatnonzero(kin.mask(*GPU_ACTIVITY))
    owner = linked.gpu_node_idx[gpu]
    unattributed = int((owner < 0).sum())
    gpu, owner = gpu[owner >= 0], owner[owner >= 0]
    order = np.lexsort((ev.ts_ns[gpu], owner))
    gpu, owner = gpu[order], owner[order]
    starts = np.searchsorted(owner, np.arange(host.num_nodes + 1))

    new_id: dict[int, int] = {}
    next_id = int(host.node_id[0]) if host.num_nodes else 0
    for i, n in enumerate(nodes):
        new_id[n["id"]] = next_id
        next_id += 1 + int(starts[i + 1] - starts[i])

    out_nodes: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    timed = 0
    for i, n in enumerate(nodes):
        node = dict(n)
        node["id"] = new_id[n["id"]]
        for key in ("ctrl_deps", "parent", "fw_parent"):
            if key in node:
                node[key] = _remap(node[key], new_id)
        if isinstance(node.get("attrs"), list):
            node["attrs"] = [
                {**a, "value": _remap(a.get("value"), new_id)}
                if isinstance(a, dict) and a.get("name") == "fw_parent" else a
                for a in node["attrs"]
            ]  # fmt: skip
        e = int(linked.node_event_idx[i])
        if e >= 0:
            timed += 1
            node["ts"] = _us(int(ev.ts_ns[e]))
            node["inclusive_dur"] = _us(int(ev.dur_ns[e]))
            node["exclusive_dur"] = _us(int(exclusive[e]))
            node["inter_thread_dep"] = None
        out_nodes.append(node)
        for k, g in enumerate(gpu[starts[i] : starts[i + 1]].tolist()):
            cat = _CAT_NAMES[Category(int(ev.cat[g]))]
            counts[cat] = counts.get(cat, 0) + 1
            child = copy.deepcopy(node)
            for key in ("ctrl_deps", "parent"):
                if key in node:
                    child[key] = node["id"]
            child.setdefault("ctrl_deps", node["id"])
            child.update(id=node["id"] + 1 + k, cat=cat, name=kin.name_of(g), ph="X",
                         ts=_us(int(ev.ts_ns[g])), inclusive_dur=_us(int(ev.dur_ns[g])),
                         exclusive_dur=_us(int(ev.dur_ns[g])),
                         stream=int(kin.processors.tid[int(ev.processor_idx[g])]))  # fmt: skip
            child.pop("inter_thread_dep", None)
            out_nodes.append(child)
    merged = {**document, "nodes": out_nodes}
    summary = MergeSummary(
        host_nodes=len(nodes),
        timed_nodes=timed,
        gpu_nodes=dict(sorted(counts.items())),
        gpu_unattributed=unattributed,
    )
    return merged, summary
