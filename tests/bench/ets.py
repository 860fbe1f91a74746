"""Tiny PyTorch Execution Traces written by hand, one per phenomenon the bench must handle.

:class:`ETBuilder` writes the schema 1.1.1 layout (``ctrl_deps``, ``attrs``, inputs as
``{values, shapes, types, strides}``) that ``ExecutionTraceObserver`` writes today; a tensor is
``[tensor_id, storage_id, offset, numel, itemsize, device]``. :func:`compute_et` is one step of
ops whose fate is known in advance (see its docstring).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

Tensor = tuple[list[Any], list[int], str]  # (value, shape, dtype)


class ETBuilder:
    """Nodes of one ET, ids in start order (the process and thread nodes come first)."""

    def __init__(self, device: str = "cpu") -> None:
        self.device = device
        self.nodes: list[dict[str, Any]] = []
        self.next_id = 1
        self.process = self._node("[pytorch|profiler|execution_trace|process]", None)
        self.thread = self._node("[pytorch|profiler|execution_trace|thread]", self.process)
        self.parent = self.thread

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def tensor(self, shape: list[int], dtype: str = "float", storage: int | None = None,
               device: str | None = None) -> Tensor:  # fmt: skip
        numel = 1
        for d in shape:
            numel *= d
        size = {"float": 4, "double": 8, "long int": 8, "bool": 1, "unsigned char": 1}[dtype]
        tid = self._id()
        sid = storage if storage is not None else self._id()
        return ([tid, sid, 0, numel, size, device or self.device], shape, dtype)

    def _node(self, name: str, parent: int | None, schema: str = "", ins: list[Any] = (),
              outs: list[Any] = (), attrs: dict[str, Any] | None = None) -> int:  # fmt: skip
        nid = self._id()
        extra = [{"name": k, "type": "string" if isinstance(v, str) else "uint64", "value": v}
                 for k, v in (attrs or {}).items()]  # fmt: skip
        self.nodes.append({
            "id": nid, "name": name, "ctrl_deps": parent if parent is not None else nid,
            "inputs": _io(ins), "outputs": _io(outs),
            "attrs": [{"name": "rf_id", "type": "uint64", "value": nid},
                      {"name": "tid", "type": "uint64", "value": 1},
                      {"name": "op_schema", "type": "string", "value": schema}, *extra],
        })  # fmt: skip
        return nid

    def step(self, n: int) -> int:
        """A ``ProfilerStep#n`` span; the ops added next go under it."""
        self.parent = self._node(f"ProfilerStep#{n}", self.thread)
        return self.parent

    def op(self, name: str, schema: str, ins: list[Any], outs: list[Any],
           parent: int | None = None, **attrs: Any) -> int:  # fmt: skip
        """An op with ``schema`` (its name picks the operator), under the current step."""
        return self._node(name, self.parent if parent is None else parent, schema, ins, outs,
                          attrs)  # fmt: skip

    def annotation(self, name: str) -> int:
        """A span with no schema (a module, an autograd wrapper): its children are outermost."""
        return self._node(name, self.parent)

    def write(self, path: Path) -> Path:
        doc = {"schema": "1.1.1-chakra.0.0.4", "pid": 1, "time": "2026-11-27 00:00:00",
               "start_ts": 1000, "finish_ts": 2000, "nodes": self.nodes}  # fmt: skip
        path.write_text(json.dumps(doc))
        return path


def _io(items: Any) -> dict[str, list[Any]]:
    """``{values, shapes, types, strides}`` of a list of tensors (:data:`Tensor`) and constants
    (``(value, type)``)."""
    out: dict[str, list[Any]] = {"values": [], "shapes": [], "types": [], "strides": []}
    for it in items:
        if isinstance(it, tuple) and len(it) == 3:
            value, shape, dtype = it
            out["values"].append(value)
            out["shapes"].append(shape)
            out["types"].append(f"Tensor({dtype})")
            strides, acc = [], 1
            for d in reversed(shape):
                strides.insert(0, acc)
                acc *= d
            out["strides"].append(strides)
        elif isinstance(it, list):  # a list of tensors
            out["values"].append([t[0] for t in it])
            out["shapes"].append([t[1] for t in it])
            out["types"].append("GenericList[" + ",".join(f"Tensor({t[2]})" for t in it) + "]")
            out["strides"].append([[] for _ in it])
        else:
            value, type_ = it
            out["values"].append(value)
            out["shapes"].append([])
            out["types"].append(type_)
            out["strides"].append([])
    return out


MM = "aten::mm(Tensor self, Tensor mat2) -> Tensor"
RELU = "aten::relu(Tensor self) -> Tensor"
CLAMP = "aten::clamp_min(Tensor self, Scalar min) -> Tensor"
ADD = "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"
ADD_ = "aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)"
NONZERO = "aten::nonzero(Tensor self) -> Tensor"
CUSTOM = "myns::custom(Tensor x) -> Tensor"
EMPTY = (
    "aten::empty.memory_format(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None,"
    " Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor"
)
RECORD = "profiler::_record_function_enter_new(str name, str? args=None) -> __torch__.torch.classes.profiler._RecordFunction"
BN_BWD = (
    "aten::cudnn_batch_norm_backward(Tensor input, Tensor grad_output, Tensor weight, "
    "Tensor? running_mean, Tensor? running_var, Tensor? save_mean, Tensor? save_var, "
    "float epsilon, Tensor reserveSpace) -> (Tensor, Tensor, Tensor)"
)
ALLREDUCE = ("c10d::allreduce_(Tensor[] tensors, __torch__.torch.classes.c10d.ProcessGroup "
             "process_group, __torch__.torch.classes.c10d.ReduceOp reduce_op, Tensor? "
             "sparse_indices, bool async_op=True, int timeout=-1) -> (Tensor[], "
             "__torch__.torch.classes.c10d.Work)")  # fmt: skip


def compute_et(path: Path, device: str = "cpu", steps: int = 1) -> Path:
    """``steps`` steps, each of 9 outermost compute ops, whose fate on the CPU is known:

    ====================================  =================================================
    op                                    on this CPU
    ====================================  =================================================
    ``aten::empty`` (outside any step)    not planned (before the first step)
    ``aten::mm`` [8,16] x [16,4]          runs
    ``aten::relu`` (``clamp_min`` inside)  runs; its child is not run again
    ``aten::add``, ``aten::add_``         run (``add_`` in place, on the ``add``'s output)
    ``aten::nonzero`` recorded [5, 2]     runs; its output is replaced by one of [5, 2]
    ``aten::mm`` [8,16] x [5,4]           raises RuntimeError: skipped
    ``myns::custom``                      no such operator in this PyTorch: skipped
    ``aten::cudnn_batch_norm_backward``   recorded on a GPU: runs as native_batch_norm_backward
    ``aten::mm`` under an autograd node   runs (the wrapper has no schema)
    ``profiler::`` bookkeeping op         not a compute op (not counted)
    ====================================  =================================================
    """
    b = ETBuilder(device)
    early = b.tensor([4])
    b.op("aten::empty", EMPTY, [([4], "GenericList[Int]"), (6, "Int"), ("<None>", "None"),
                                ("cpu", "Device"), (False, "Bool"), ("<None>", "None")],
         [early])  # fmt: skip
    for n in range(steps):
        b.step(n)
        x, w, bad = b.tensor([8, 16]), b.tensor([16, 4]), b.tensor([5, 4])
        y = b.tensor([8, 4])
        b.op("aten::mm", MM, [x, w], [y])
        r = b.tensor([8, 4])
        relu = b.op("aten::relu", RELU, [y], [r])
        b.op("aten::clamp_min", CLAMP, [y, (0, "Int")], [b.tensor([8, 4])], parent=relu)
        s = b.tensor([8, 4])
        b.op("aten::add", ADD, [r, r, (1, "Int")], [s])
        b.op("aten::add_", ADD_, [s, r, (1, "Int")], [s])
        b.op("aten::nonzero", NONZERO, [s], [b.tensor([5, 2], "long int")])
        b.op("aten::mm", MM, [x, bad], [b.tensor([8, 4])])
        b.op("myns::custom", CUSTOM, [x], [b.tensor([8, 16])])
        inp, grad = b.tensor([2, 3, 4, 4], device="cuda:0"), b.tensor([2, 3, 4, 4], device="cuda:0")
        stats = [b.tensor([3], device="cuda:0") for _ in range(5)]
        reserve = b.tensor([0], "unsigned char", device="cuda:0")
        outs = [b.tensor(s, device="cuda:0") for s in ([2, 3, 4, 4], [3], [3])]
        b.op("aten::cudnn_batch_norm_backward", BN_BWD,
             [inp, grad, *stats, (1e-5, "Double"), reserve], outs)  # fmt: skip
        b.op("profiler::_record_function_enter_new", RECORD, [("x", "String"),
                                                              ("<None>", "None")], [])  # fmt: skip
        node = b.annotation("autograd::engine::evaluate_function: MmBackward0")
        b.op("aten::mm", MM, [y, b.tensor([4, 4])], [b.tensor([8, 4])], parent=node)
    return b.write(path)


def allreduce_et(path: Path, rank: int, world: int = 2, steps: int = 2) -> Path:
    """One rank of a gloo data-parallel job: per step a matrix product, an all-reduce of its
    4 KiB output (async, as DDP issues it), then an op that reads the reduced tensor."""
    b = ETBuilder()
    pg = json.dumps([{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cpu:gloo",
                      "ranks": [], "group_size": world, "group_count": 1}])  # fmt: skip
    b._node("## process_group:init ##", b.thread, "", [(pg, "String")], [])
    for n in range(steps):
        b.step(n)
        x, w, y = b.tensor([32, 64]), b.tensor([64, 32]), b.tensor([32, 32])
        b.op("aten::mm", MM, [x, w], [y])
        b.op("c10d::allreduce_", ALLREDUCE,
             [[y], ("<Object>", "Object"), ("<Object>", "Object"), ("<None>", "None"),
              (True, "Bool"), (-1, "Int")], [[y], ("<Object>", "Object")])  # fmt: skip
        b.op("aten::add", ADD, [y, y, (1, "Int")], [b.tensor([32, 32])])
    doc_path = b.write(path)
    doc = json.loads(doc_path.read_text())
    doc["distributedInfo"] = {"rank": rank, "world_size": world, "backend": "gloo"}
    doc_path.write_text(json.dumps(doc))
    return doc_path
