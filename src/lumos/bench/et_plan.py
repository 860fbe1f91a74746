"""A PyTorch Execution Trace as a :class:`~lumos.bench.plan.RankPlan`: its outermost ops, in order.

What runs is the *outermost* operator of every call chain: a node with an op schema (or a
``c10d::`` collective) none of whose ancestors is one. Running ``aten::linear`` runs the
``aten::t`` and ``aten::addmm`` it recorded below it, so those are not run again; autograd
wrappers (``autograd::engine::evaluate_function: ...``, ``AddmmBackward0``), module and user
annotations carry no schema, so the ops below them are outermost. Nodes run in id order, the
order they started in (ids are assigned as ops start, on every thread), which respects every
data dependency the trace recorded.

==================  ========================================================================
ET node             plan
==================  ========================================================================
``ProfilerStep#N``  a step; an op belongs to the last step whose id is not above its own (the
                    backward thread's ops too). No step marks: one step, ``ProfilerStep#0``
``c10d::<op>``      a :class:`~lumos.bench.plan.CommCall`; kind from the name, group from
                    its ``record_param_comms`` child and the ``## process_group:init ##``
                    node, root/peer from its arguments
other outermost op  an :class:`~lumos.bench.plan.OpCall` with its recorded arguments
``triton_...``      a kernel ``torch.compile`` launched (``triton_poi_fused_...``, no op
                    schema): a compute op whose code is not in the trace, counted and skipped
``profiler::`` ops  bookkeeping of ``record_function``, not compute: left out of the count
==================  ========================================================================

A tensor argument ``[tensor_id, storage_id, offset, numel, itemsize, device]`` becomes a slot:
the same six values are the same tensor everywhere in the trace, so an op's output feeds the
ops that recorded it as an input. Ops the plan cannot rebuild (an argument that is a script
object, a collective of unknown kind or on ranks not in the run) are counted by reason.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from lumos.bench.classes import op_class
from lumos.bench.plan import Arg, CommCall, Item, OpCall, RankPlan, Skips, Step, TensorSpec
from lumos.ingest.comm_names import dtype_size_bytes, normalize_collective
from lumos.ingest.et_comm import iter_tensors
from lumos.ingest.pytorch_et import HostTrace

__all__ = ["STEP_RE", "plan_et"]

STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
_TENSOR_TYPE = re.compile(r"Tensor\(((?:[^()]|\([^()]*\))*)\)")
_UNDEFINED = "nullptr (uninitialized)"
_PG_INIT = "## process_group:init ##"
_NOT_COMPUTE = ("profiler::",)
_TRITON = "a Triton kernel of torch.compile (its code is not in the trace)"

# Argument positions of the c10d ops: (outputs, inputs, root/peer) by op name (without the
# namespace); None where the op has none. Tensors in/out: all_reduce-like ops work in place.
_C10D_ARGS: dict[str, tuple[int | None, int | None, int | None]] = {
    "allreduce_": (0, 0, None), "allreduce_coalesced_": (0, 0, None),
    "broadcast_": (0, 0, 2), "reduce_": (0, 0, 3),
    "allgather_": (0, 1, None), "_allgather_base_": (0, 1, None),
    "allgather_into_tensor_coalesced_": (0, 1, None), "allgather_coalesced_": (0, 1, None),
    "reduce_scatter_": (0, 1, None), "_reduce_scatter_base_": (0, 1, None),
    "reduce_scatter_tensor_coalesced_": (0, 1, None),
    "alltoall_base_": (0, 1, None), "alltoall_": (0, 1, None),
    "gather_": (0, 1, 3), "scatter_": (0, 1, 3),
    "send": (None, 0, 2), "recv_": (0, None, 2), "recv_any_source_": (0, None, None),
    "barrier": (None, None, None),
}  # fmt: skip


class _Slots:
    """Recorded tensors -> slot numbers, and each slot's spec.

    The six recorded values name a tensor only while it lives: older ETs reuse tensor ids
    once a tensor is freed. So an op output that is not also one of the op's inputs (not
    in place) starts a new slot for its key, and so does a key met with another shape."""

    def __init__(self) -> None:
        self.index: dict[tuple[Any, ...], int] = {}
        self.specs: list[TensorSpec] = []

    def slot(
        self, value: list[Any], shape: Any, strides: Any, dtype: str, fresh: bool = False
    ) -> int:
        key = tuple(value[:6])
        dims = tuple(int(d) for d in shape) if _int_list(shape) else ()
        got = self.index.get(key)
        if got is not None and not fresh and self.specs[got].shape == dims:
            return got
        st = tuple(int(s) for s in strides) if _int_list(strides) and strides else None
        if st is not None and len(st) != len(dims):
            st = None
        device = str(value[5]) if len(value) > 5 else ""
        spec = TensorSpec(dims, st, dtype or _dtype_of_itemsize(int(value[4])),
                          on_gpu=device not in ("", "cpu"), storage=int(value[1]))  # fmt: skip
        self.index[key] = len(self.specs)
        self.specs.append(spec)
        return len(self.specs) - 1


def _int_list(v: Any) -> bool:
    return isinstance(v, list) and all(type(x) is int for x in v)


def _dtype_of_itemsize(itemsize: int) -> str:
    return {1: "unsigned char", 2: "c10::Half", 4: "float", 8: "double"}.get(itemsize, "float")


def _is_tensor_value(v: Any) -> bool:
    return isinstance(v, list) and len(v) >= 5 and all(type(x) is int for x in v[:5])


class _Unrebuildable(Exception):
    """An argument the plan cannot turn into a value (the reason is the message)."""


def _encode(
    value: Any, shape: Any, strides: Any, type_: Any, slots: _Slots, fresh: frozenset[Any]
) -> Arg:
    """One recorded argument as an :data:`~lumos.bench.plan.Arg`."""
    t = str(type_) if type_ is not None else ""
    if t.startswith("Tensor("):
        dtype = _TENSOR_TYPE.match(t)
        name = dtype.group(1) if dtype else ""
        if name == _UNDEFINED or not _is_tensor_value(value):
            return ("c", None)
        return ("t", slots.slot(value, shape, strides, name, tuple(value[:6]) in fresh))
    if t.startswith("GenericList[") and "Tensor(" in t:
        names = _TENSOR_TYPE.findall(t)
        out = []
        for k, v in enumerate(_flat_tensors(value)):
            name = names[k] if k < len(names) else (names[-1] if names else "")
            sh = _nth(shape, k, value)
            st = _nth(strides, k, value)
            new = tuple(v[:6]) in fresh
            out.append(-1 if name == _UNDEFINED else slots.slot(v, sh, st, name, new))
        return ("T", tuple(out))
    if t == "Device":
        return ("d", "cpu" if str(value) == "cpu" else "gpu")
    if t in ("None", "Generator") or value in ("<None>", "<Generator>"):
        return ("c", None)
    if t == "Object" or value == "<Object>":
        raise _Unrebuildable("an argument the trace cannot rebuild (a script object)")
    if isinstance(value, (int, float, str)) or value is None:
        return ("c", value)
    if isinstance(value, list) and all(isinstance(x, (int, float, bool)) for x in value):
        return ("c", list(value))
    raise _Unrebuildable(f"an argument of a type the plan does not rebuild ({t or '?'})")


def _flat_tensors(value: Any) -> list[list[Any]]:
    return list(iter_tensors(value)) if isinstance(value, list) else []


def _nth(meta: Any, k: int, value: Any) -> Any:
    """The shape (or strides) of the ``k``-th tensor of a (possibly nested) list argument."""
    flat: list[Any] = []

    def walk(m: Any, v: Any) -> None:
        if _is_tensor_value(v):
            flat.append(m)
        elif isinstance(v, list) and isinstance(m, list):
            for mm, vv in zip(m, v, strict=False):
                walk(mm, vv)

    walk(meta, value)
    return flat[k] if k < len(flat) else None


def _args(io: Any, slots: _Slots, fresh: frozenset[Any] = frozenset()) -> tuple[Arg, ...]:
    n = len(io.values)
    shapes = list(io.shapes) + [None] * (n - len(io.shapes))
    types = list(io.types) + [None] * (n - len(io.types))
    strides = list(io.strides or []) + [None] * (n - len(io.strides or []))
    return tuple(_encode(io.values[k], shapes[k], strides[k], types[k], slots, fresh)
                 for k in range(n))  # fmt: skip


def _keys(io: Any) -> set[tuple[Any, ...]]:
    return {tuple(v[:6]) for v in _flat_tensors(list(io.values))}


def _outputs(io: Any, inputs: Any, slots: _Slots) -> tuple[Arg, ...]:
    """The encoded outputs; a tensor the op did not take as an input is a new one."""
    fresh = frozenset(_keys(io) - _keys(inputs))
    try:
        return _args(io, slots, fresh)
    except _Unrebuildable:  # outputs such as a Work object carry nothing to keep
        return tuple(("c", None) for _ in io.values)


def _outermost(trace: HostTrace, is_op: np.ndarray) -> np.ndarray:
    """Nodes that are ops with no op among their ancestors."""
    n = trace.num_nodes
    under = np.zeros(n, dtype=bool)  # has an op ancestor
    done = np.zeros(n, dtype=bool)
    parent = trace.parent_idx
    for i in range(n):
        chain = []
        j = i
        while j >= 0 and not done[j]:
            chain.append(j)
            j = int(parent[j])
        flag = bool(under[j] or is_op[j]) if j >= 0 else False
        for k in reversed(chain):
            under[k] = flag
            done[k] = True
            flag = flag or bool(is_op[k])
    return is_op & ~under


def _groups(trace: HostTrace) -> dict[str, tuple[int, ...]]:
    """Process-group name -> global ranks, from the ``## process_group:init ##`` node."""
    from lumos.ingest.et_summary import process_groups

    out: dict[str, tuple[int, ...]] = {}
    for g in process_groups(trace):
        ranks = g.get("ranks")
        size = g.get("group_size")
        if isinstance(ranks, list) and ranks and all(type(r) is int for r in ranks):
            out[str(g.get("pg_name"))] = tuple(ranks)
        elif type(size) is int and size > 0:  # [] = every rank of the job
            out[str(g.get("pg_name"))] = tuple(range(size))
    return out


def _comm_rows(trace: HostTrace) -> dict[int, int]:
    """Node index of a collective's outermost op -> its row in ``trace.comm``."""
    c = trace.comm
    out: dict[int, int] = {}
    for row in range(len(c)):
        if c.collective(row) == "wait":
            continue
        j = int(trace.parent_idx[int(c.node_idx[row])])
        while j >= 0:
            if trace.name(j).startswith("c10d::"):
                out.setdefault(j, row)
                break
            j = int(trace.parent_idx[j])
    return out


def _comm(
    trace: HostTrace,
    i: int,
    slots: _Slots,
    row: int | None,
    pgs: Mapping[str, tuple[int, ...]],
) -> CommCall:
    name = trace.name(i)
    kind = normalize_collective(name)
    if kind == "unknown":
        raise _Unrebuildable("a collective of a kind lumos does not know")
    io = trace.inputs(i)
    outs_at, ins_at, peer_at = _C10D_ARGS.get(name.split("::", 1)[-1], (0, 0, None))
    values, types = io.values, io.types

    def tensors_at(k: int | None) -> tuple[int, ...]:
        if k is None or k >= len(values):
            return ()
        v = values[k]
        t = str(types[k]) if k < len(types) else ""
        shape = io.shapes[k] if k < len(io.shapes) else None
        strides = io.strides[k] if io.strides and k < len(io.strides) else None
        names = _TENSOR_TYPE.findall(t)
        got = []
        for m, tv in enumerate(_flat_tensors(v)):
            dt = names[m] if m < len(names) else (names[-1] if names else "")
            got.append(slots.slot(tv, _nth(shape, m, v) if not _is_tensor_value(v) else shape,
                                  _nth(strides, m, v) if not _is_tensor_value(v) else strides,
                                  dt))  # fmt: skip
        return tuple(got)

    inputs, outputs = tensors_at(ins_at), tensors_at(outs_at)
    peer = values[peer_at] if peer_at is not None and peer_at < len(values) else -1
    group: tuple[int, ...] | None = None
    dtype = ""
    if row is not None:
        c = trace.comm
        ranks = pgs.get(c.pg_name(row)) or c.group_ranks(row)
        dtype = c.strings[int(c.dtype_idx[row])]
        group = tuple(ranks) if ranks else None
    sized = outputs if kind == "all_gather" else (inputs or outputs)
    size = sum(slots.specs[s].numel * dtype_size_bytes(slots.specs[s].dtype) for s in sized)
    splits = ((), ())
    if name.endswith("alltoall_base_") and len(values) > 4:
        splits = (tuple(values[3]) if _int_list(values[3]) else (),
                  tuple(values[4]) if _int_list(values[4]) else ())  # fmt: skip
    return CommCall(
        node_id=int(trace.node_id[i]), name=name, kind=kind, inputs=inputs, outputs=outputs,
        size_bytes=size, dtype=dtype or (slots.specs[sized[0]].dtype if sized else ""),
        group=group, peer=int(peer) if type(peer) is int else -1,
        root=int(peer) if kind in ("broadcast", "reduce", "gather", "scatter") and
        type(peer) is int else -1,
        out_splits=splits[0], in_splits=splits[1],
    )  # fmt: skip


def plan_et(
    trace: HostTrace,
    *,
    rank: int = 0,
    run_ranks: Sequence[int] = (0,),
    source_ns: Mapping[str, int] | None = None,
) -> RankPlan:
    """The plan of one rank's ET (see the module docstring). ``run_ranks`` are the global
    ranks of the run (a collective whose group holds others is skipped); ``source_ns`` the
    recorded duration of each step by name, when the source has timing."""
    n = trace.num_nodes
    names = trace.names
    schemas = trace.op_schemas
    has_schema = np.fromiter((bool(s) for s in schemas), bool, len(schemas))[trace.op_schema_idx]
    is_comm = np.fromiter((s.startswith("c10d::") for s in names), bool, len(names))
    not_compute = np.fromiter((s.startswith(_NOT_COMPUTE) for s in names), bool, len(names))
    is_op = has_schema | is_comm[trace.name_idx]
    notes: list[str] = []
    if "op_schema" not in trace.fields_present:
        named = np.fromiter(("::" in s for s in names), bool, len(names))
        is_op = is_op | named[trace.name_idx]
        notes.append("the trace records no op schemas: its ops cannot be looked up")
    # a Triton kernel's node (torch.compile) is a compute op with no schema to call it by
    triton = np.fromiter((s.startswith("triton_") for s in names), bool, len(names))
    is_op = is_op | triton[trace.name_idx]
    outer = np.flatnonzero(_outermost(trace, is_op) & ~not_compute[trace.name_idx])

    step_ids = [(int(trace.node_id[i]), trace.name(i)) for i in range(n)
                if STEP_RE.match(trace.name(i))]  # fmt: skip
    step_ids.sort()
    if not step_ids:
        notes.append("no ProfilerStep marks: the whole trace is one step, ProfilerStep#0")
        step_ids = [(int(trace.node_id[0]) - 1, "ProfilerStep#0")]
    starts = np.asarray([s for s, _ in step_ids], dtype=np.int64)
    where = np.searchsorted(starts, trace.node_id[outer], side="right") - 1
    before = int((where < 0).sum())
    if before:
        notes.append(f"{before} op(s) before the first step left out")

    slots = _Slots()
    skipped, comm_skipped = Skips(), Skips()
    pgs = _groups(trace)
    rows = _comm_rows(trace)
    run = set(run_ranks)
    per_step: list[list[Item]] = [[] for _ in step_ids]
    ops_total = comms_total = 0
    for i, k in zip(outer.tolist(), where.tolist(), strict=True):
        if k < 0:
            continue
        name = names[int(trace.name_idx[i])]
        comm = bool(is_comm[int(trace.name_idx[i])])
        comms_total += comm
        ops_total += not comm
        try:
            if comm:
                call = _comm(trace, i, slots, rows.get(i), pgs)
                if call.group is not None and not set(call.group) <= run:
                    missing = len(set(call.group) - run)
                    raise _Unrebuildable(f"its group has {missing} rank(s) not in this run")
                per_step[k].append(call)
                continue
            schema = schemas[int(trace.op_schema_idx[i])]
            if not schema:
                raise _Unrebuildable(_TRITON if name.startswith("triton_") else
                                     "no op schema recorded")  # fmt: skip
            ins = trace.inputs(i)
            args = _args(ins, slots)
            per_step[k].append(OpCall(
                node_id=int(trace.node_id[i]), name=name, schema=schema, args=args,
                outputs=_outputs(trace.outputs(i), ins, slots), op_class=op_class(name),
            ))  # fmt: skip
        except _Unrebuildable as exc:
            (comm_skipped if comm else skipped).add(str(exc), name)
    times = source_ns or {}
    steps = tuple(Step(name, tuple(items), times.get(name))
                  for (_, name), items in zip(step_ids, per_step, strict=True) if items)  # fmt: skip
    groups = tuple(sorted({g for g in pgs.values() if set(g) <= run and len(g) < len(run)}))
    return RankPlan(
        rank=rank, world_size=len(run), source=trace.path, steps=steps,
        tensors=tuple(slots.specs), ops_total=ops_total, comms_total=comms_total,
        skipped=skipped, comm_skipped=comm_skipped, groups=groups, notes=tuple(notes),
        host_only=not any(s.on_gpu for s in slots.specs),
    )  # fmt: skip
