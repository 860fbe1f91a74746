"""Recorded op calls bound to the local PyTorch: the operator, its arguments, what fills them.

:func:`bind` turns an :class:`~lumos.bench.plan.OpCall` into a :class:`BoundOp` or says why it
cannot run here. The operator is the recorded schema's ``namespace::name.overload`` looked up
in ``torch.ops``; recorded arguments go to the local schema's arguments in order (keyword-only
ones by name, the rest by position); tensors are filled in from slots at each call.

Why an op cannot run (the reasons ``bench.json`` counts):

=========================================  ================================================
reason                                     when
=========================================  ================================================
``no such operator in this PyTorch``       the namespace, name or overload is not registered
                                           (a custom op whose library is not loaded)
``no <device> kernel (a <other>-only op)``  the operator has no kernel for the run's device
``recorded arguments do not fit ...``      more arguments than the local schema takes
=========================================  ================================================

A few GPU-only operators have a portable twin with the same arithmetic; on a CPU run they run
as that twin (:data:`TWINS`; ``bench.json`` lists each one under ``substituted``):
``cudnn_batch_norm`` and its backward as ``native_batch_norm``, ``cudnn_convolution`` as
``convolution``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lumos.bench.plan import Arg, OpCall

__all__ = ["TWINS", "BoundOp", "CannotRun", "bind"]

_SCHEMA_NAME = re.compile(r"^\s*([\w.]+)::([\w]+)(?:\.([\w]+))?\s*\(")
_COMPOSITE = ("CompositeImplicitAutograd", "CompositeExplicitAutograd",
              "CompositeExplicitAutogradNonFunctional")  # fmt: skip


class CannotRun(Exception):
    """Why an op cannot run here (the message is the reason ``bench.json`` counts)."""


@dataclass(slots=True)
class BoundOp:
    """A callable op: ``fn(*args, **kwargs)`` after ``fills`` put the tensors in.

    ``fills`` are ``(key, tag, payload)``: ``key`` an int position in ``args`` or a str
    keyword; ``tag`` ``"t"`` (one slot) or ``"T"`` (a list of slots). ``outputs`` maps the
    result's parts to slots (see :func:`lumos.bench.execute`); ``twin`` names the op it
    runs instead of the recorded one, if any."""

    fn: Callable[..., Any]
    args: list[Any]
    kwargs: dict[str, Any]
    fills: list[tuple[int | str, str, Any]]
    outputs: tuple[Arg, ...]
    twin: str = ""


def _lookup(torch: Any, ns: str, name: str, overload: str | None) -> Any:
    try:
        packet = getattr(getattr(torch.ops, ns), name)
        return getattr(packet, overload or "default")
    except (AttributeError, RuntimeError):
        raise CannotRun("no such operator in this PyTorch") from None


def _kernel_key(device_type: str) -> str:
    return {"cuda": "CUDA", "cpu": "CPU", "xpu": "XPU", "mps": "MPS"}.get(device_type, "CPU")


def _has_kernel(torch: Any, qualified: str, device_type: str) -> bool:
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    return any(has(qualified, k) for k in (_kernel_key(device_type), *_COMPOSITE))


def bind(call: OpCall, torch: Any, device: str, *, host: str = "cpu") -> BoundOp:
    """The op of ``call`` bound for ``device`` (``"cpu"``, ``"cuda:0"``...); a recorded
    host device argument becomes ``host`` (``device`` too for a trace recorded without an
    accelerator). Raises :class:`CannotRun` with the reason it cannot run here."""
    m = _SCHEMA_NAME.match(call.schema)
    if m is None:
        raise CannotRun("no such operator in this PyTorch")
    ns, name, overload = m.groups()
    qualified = f"{ns}::{name}" + (f".{overload}" if overload else "")
    device_type = device.split(":", 1)[0]
    twin = TWINS.get(qualified) if device_type == "cpu" else None
    if twin is not None:
        return twin(call, torch, device)
    op = _lookup(torch, ns, name, overload)
    if not _has_kernel(torch, qualified, device_type):
        other = "GPU" if device_type == "cpu" else "CPU"
        raise CannotRun(f"no {device_type} kernel (a {other}-only op)")
    params = op._schema.arguments
    if len(call.args) > len(params):
        raise CannotRun("recorded arguments do not fit this PyTorch's schema")
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    fills: list[tuple[int | str, str, Any]] = []
    pin_ok = device_type == "cuda" or bool(torch.cuda.is_available())
    for arg, param in zip(call.args, params, strict=False):
        key: int | str = param.name if param.kwarg_only else len(args)
        tag, payload = arg
        if tag in ("t", "T"):
            value: Any = None
            fills.append((key, tag, payload))
        elif tag == "d":
            value = host if payload == "cpu" else device
        elif param.name == "pin_memory" and payload and not pin_ok:
            value = False
        else:
            value = payload
        if param.kwarg_only:
            kwargs[param.name] = value
        else:
            args.append(value)
    return BoundOp(op, args, kwargs, fills, call.outputs)


# ---------------------------------------------------------------------------------------------
# Portable twins of GPU-only operators (same arithmetic, other argument order)


def _positional(call: OpCall, order: list[int | tuple[str, Any]], fn: Any, twin: str,
                outputs: tuple[Arg, ...]) -> BoundOp:  # fmt: skip
    """A bound op whose positional arguments are the recorded ones picked by ``order``
    (an index) or constants (``("c", value)``)."""
    args: list[Any] = []
    fills: list[tuple[int | str, str, Any]] = []
    for pick in order:
        if isinstance(pick, tuple):
            args.append(pick[1])
            continue
        if pick >= len(call.args):
            raise CannotRun("recorded arguments do not fit this PyTorch's schema")
        tag, payload = call.args[pick]
        if tag in ("t", "T"):
            fills.append((len(args), tag, payload))
            args.append(None)
        else:
            args.append(payload)
    return BoundOp(fn, args, {}, fills, outputs, twin)


def _batch_norm(call: OpCall, torch: Any, device: str) -> BoundOp:
    # cudnn_batch_norm(input, weight, bias, running_mean, running_var, training, factor, eps)
    #   -> (out, save_mean, save_var, reserve); native_batch_norm returns the first three
    return _positional(call, [0, 1, 2, 3, 4, 5, 6, 7], torch.ops.aten.native_batch_norm.default,
                       "aten::native_batch_norm", call.outputs[:3])  # fmt: skip


def _batch_norm_backward(call: OpCall, torch: Any, device: str) -> BoundOp:
    # cudnn_batch_norm_backward(input, grad_output, weight, running_mean, running_var,
    #   save_mean, save_var, epsilon, reserve) -> native_batch_norm_backward(grad_out, input,
    #   weight, running_mean, running_var, save_mean, save_invstd, train, eps, output_mask)
    order: list[int | tuple[str, Any]] = [1, 0, 2, 3, 4, 5, 6, ("c", True), 7,
                                          ("c", [True, True, True])]  # fmt: skip
    return _positional(call, order, torch.ops.aten.native_batch_norm_backward.default,
                       "aten::native_batch_norm_backward", call.outputs)  # fmt: skip


def _convolution(call: OpCall, torch: Any, device: str) -> BoundOp:
    # cudnn_convolution(input, weight, padding, stride, dilation, groups, benchmark,
    #   deterministic, allow_tf32) -> convolution(input, weight, bias, stride, padding,
    #   dilation, transposed, output_padding, groups)
    pad = call.args[2][1] if len(call.args) > 2 else [0, 0]
    zeros = [0] * len(pad) if isinstance(pad, list) else [0, 0]
    order: list[int | tuple[str, Any]] = [0, 1, ("c", None), 3, 2, 4, ("c", False),
                                          ("c", zeros), 5]  # fmt: skip
    return _positional(call, order, torch.ops.aten.convolution.default, "aten::convolution",
                       call.outputs)  # fmt: skip


#: Recorded GPU-only operator -> its portable twin on a CPU run.
TWINS: dict[str, Callable[[OpCall, Any, str], BoundOp]] = {
    "aten::cudnn_batch_norm": _batch_norm,
    "aten::cudnn_batch_norm_backward": _batch_norm_backward,
    "aten::cudnn_convolution": _convolution,
}
