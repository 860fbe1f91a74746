"""What one rank executes, torch-free: steps of compute ops and communication, in recorded order.

A :class:`RankPlan` is built from a trace (:mod:`lumos.bench.et_plan` for PyTorch ETs,
:mod:`lumos.bench.chakra_plan` for Chakra ETs) and run by :mod:`lumos.bench.execute`. It holds
no torch object, so it is built, tested and pickled without torch.

==================  ==========================================================================
item                what runs
==================  ==========================================================================
:class:`OpCall`     one recorded operator (``aten::addmm``...) with its recorded arguments:
                    tensors are slots of :attr:`RankPlan.tensors`, the rest constants
:class:`CommCall`   one collective or point-to-point transfer of the recorded kind, size,
                    group, peer and root, on the tensors the trace names (or new ones)
:class:`WorkCall`   an op known only by its class and work (a Chakra node): a matrix product
                    of its FLOPs or shapes, an element-wise op of its bytes
==================  ==========================================================================

Arguments are encoded as small tuples (see :data:`Arg`): ``("c", value)`` a constant,
``("t", slot)`` a tensor, ``("T", (slot, ...))`` a list of tensors (slot -1: an undefined
tensor), ``("d", "cpu"|"gpu")`` a device, recorded on the host or on an accelerator.

Ops that cannot run are never dropped silently: each plan counts what it left out by reason
(:attr:`RankPlan.skipped`, reason -> op name -> count); the executor adds what failed at run time.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Arg",
    "CommCall",
    "Item",
    "OpCall",
    "RankPlan",
    "Skips",
    "Step",
    "TensorSpec",
    "WorkCall",
    "tensor_slots",
]

#: One encoded argument or output (see the module docstring).
Arg = tuple[str, Any]


@dataclass(frozen=True, slots=True)
class TensorSpec:
    """A recorded tensor: what a new one is made with. ``strides`` None = contiguous; ``dtype``
    as the trace spells it (``float``, ``c10::BFloat16``, ``long int``); ``on_gpu`` whether it
    lived on an accelerator; ``storage`` the recorded storage id (-1 unknown), which tells the
    executor which tensors an in-flight collective still writes."""

    shape: tuple[int, ...]
    strides: tuple[int, ...] | None
    dtype: str
    on_gpu: bool
    storage: int = -1

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True, slots=True)
class OpCall:
    """A recorded operator call. ``schema`` is the recorded op schema (its name and overload
    pick the local operator); ``args`` follow the schema's arguments in order; ``outputs``
    are the recorded outputs (``("t", slot)``, ``("T", slots)`` or ``("c", None)``)."""

    node_id: int
    name: str
    schema: str
    args: tuple[Arg, ...]
    outputs: tuple[Arg, ...]
    op_class: str


@dataclass(frozen=True, slots=True)
class CommCall:
    """A collective (``kind`` as :func:`lumos.ingest.comm_names.normalize_collective` names
    it) or a send/recv. ``inputs``/``outputs`` are tensor slots (for an all-gather the outputs
    are the gathered buffers); ``size_bytes`` the message as lumos defines it (see
    :class:`lumos.graph.model.Comms`); ``group`` the global ranks of its group, None for every
    rank of the run; ``peer`` and ``root`` global ranks (-1 when none)."""

    node_id: int
    name: str
    kind: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    size_bytes: int
    dtype: str
    group: tuple[int, ...] | None = None
    peer: int = -1
    root: int = -1
    in_splits: tuple[int, ...] = ()
    out_splits: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class WorkCall:
    """An op known by its class and work only: ``gemm`` runs ``batch`` products of
    ``[m, k] x [k, n]`` (a square product of its FLOPs); any other class with ``bytes`` an
    element-wise add that moves them (read twice, written once); ``memory`` a view. With
    ``no_work`` nothing says what it computed: it is held for ``dur_ns`` (emulated) or
    skipped. ``gap_ns`` is the time its thread spent before it, after the op before it (the
    framework's overhead as recorded), which an emulating run keeps."""

    node_id: int
    name: str
    op_class: str
    flops: int = 0
    bytes: int = 0
    mkn: tuple[int, int, int, int] | None = None  # (batch, m, k, n)
    on_gpu: bool = False
    dur_ns: int = 0
    no_work: bool = False
    gap_ns: int = 0


Item = OpCall | CommCall | WorkCall


@dataclass(frozen=True, slots=True)
class Step:
    """One iteration: its name (``ProfilerStep#N``), its items in execution order, and the
    recorded duration when the source has timing (None otherwise)."""

    name: str
    items: tuple[Item, ...]
    source_ns: int | None = None


class Skips:
    """Counts of ops left out, by reason and op name (insertion-ordered, merged in order)."""

    def __init__(self) -> None:
        self.by_reason: dict[str, dict[str, int]] = {}
        #: (reason, op) -> the first error message seen, for reasons that are exceptions.
        self.examples: dict[tuple[str, str], str] = {}

    def add(self, reason: str, name: str, count: int = 1, example: str = "") -> None:
        per = self.by_reason.setdefault(reason, {})
        per[name] = per.get(name, 0) + count
        if example:
            self.examples.setdefault((reason, name), example)

    def merge(self, other: Skips) -> None:
        for reason, names in other.by_reason.items():
            for name, n in names.items():
                self.add(reason, name, n, other.examples.get((reason, name), ""))

    def total(self) -> int:
        return sum(n for names in self.by_reason.values() for n in names.values())

    def counts(self) -> dict[str, int]:
        """Reason -> count, sorted by reason."""
        return {r: sum(n.values()) for r, n in sorted(self.by_reason.items())}

    def rows(self) -> list[dict[str, Any]]:
        """``[{reason, op, count[, example]}]`` sorted by reason then op."""
        out = []
        for r in sorted(self.by_reason):
            for op, n in sorted(self.by_reason[r].items()):
                row: dict[str, Any] = {"reason": r, "op": op, "count": n}
                if (r, op) in self.examples:
                    row["example"] = self.examples[(r, op)]
                out.append(row)
        return out


@dataclass(frozen=True, eq=False)
class RankPlan:
    """Everything one rank runs. ``ops_total`` counts the compute ops of the steps (those in
    ``steps`` plus those skipped while planning); ``comms_total`` the collectives and
    transfers likewise; ``skipped`` and ``comm_skipped`` what the plan left out of each.
    ``groups`` are the process groups (global ranks) the rank must create,
    in an order every rank shares."""

    rank: int
    world_size: int
    source: str
    steps: tuple[Step, ...]
    tensors: tuple[TensorSpec, ...]
    ops_total: int
    comms_total: int
    skipped: Skips = field(default_factory=Skips)
    comm_skipped: Skips = field(default_factory=Skips)
    groups: tuple[tuple[int, ...], ...] = ()
    #: Facts about the source worth reporting (schema version, how steps were found...).
    notes: tuple[str, ...] = ()
    #: Recorded on a machine without an accelerator (no tensor or op on one): its host was
    #: its compute device, so a run on an accelerator puts everything there.
    host_only: bool = False

    def items(self) -> Iterator[Item]:
        for s in self.steps:
            yield from s.items


def tensor_slots(arg: Arg) -> Iterator[int]:
    """Every tensor slot an encoded argument names (-1, an undefined tensor, left out).

    >>> list(tensor_slots(("T", (3, -1, 4)))), list(tensor_slots(("c", 1.0)))
    ([3, 4], [])
    """
    tag, payload = arg
    if tag == "t" and payload >= 0:
        yield payload
    elif tag == "T":
        yield from (s for s in payload if s >= 0)
