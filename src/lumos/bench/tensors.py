"""Tensors made from recorded specs: the recorded shape, dtype and strides, on the local device.

Values are not recorded, so they are made up, chosen so that ops run on them without
errors a real run would not have: floating-point tensors hold uniform values in [0.5, 1)
(positive: ``sqrt``, ``log`` and divisions stay finite), integer and boolean tensors zeros (a
valid index into any non-empty dimension, a valid class for a loss). A tensor recorded on an
accelerator is made on the run's device, a host tensor on the host (the run's device too when
the trace was recorded without an accelerator: see :attr:`lumos.bench.plan.RankPlan.host_only`).
"""

from __future__ import annotations

from typing import Any

from lumos.bench.plan import TensorSpec
from lumos.collect._torch import import_torch

__all__ = ["dtype_of", "make_tensor", "torch_dtype_name"]

# Recorded dtype spellings (lower-case, without c10:: or spaces) -> torch attribute names.
_DTYPES = {
    "float": "float32", "float32": "float32", "double": "float64", "float64": "float64",
    "half": "float16", "float16": "float16", "bfloat16": "bfloat16",
    "long": "int64", "longint": "int64", "int64": "int64", "int64_t": "int64",
    "int": "int32", "int32": "int32", "short": "int16", "shortint": "int16", "int16": "int16",
    "signedchar": "int8", "char": "int8", "int8": "int8",
    "unsignedchar": "uint8", "uint8": "uint8", "byte": "uint8", "bool": "bool",
    "complex<float>": "complex64", "complexfloat": "complex64", "complex64": "complex64",
    "complex<double>": "complex128", "complexdouble": "complex128", "complex128": "complex128",
    "complex<c10::half>": "complex32",
    "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2",
    "float8_e4m3fnuz": "float8_e4m3fnuz", "float8_e5m2fnuz": "float8_e5m2fnuz",
}  # fmt: skip


def torch_dtype_name(recorded: str) -> str:
    """The torch dtype name of a recorded dtype spelling; ``float32`` when unknown.

    >>> torch_dtype_name("c10::BFloat16"), torch_dtype_name("long int"), torch_dtype_name("?")
    ('bfloat16', 'int64', 'float32')
    """
    key = recorded.strip().lower().replace("c10::", "").replace(" ", "")
    return _DTYPES.get(key, "float32")


def dtype_of(recorded: str) -> Any:
    """The ``torch.dtype`` of a recorded dtype spelling (float32 when unknown)."""
    torch = import_torch("lumos bench")
    return getattr(torch, torch_dtype_name(recorded), torch.float32)


def make_tensor(spec: TensorSpec, device: Any, host: Any) -> Any:
    """A new tensor for ``spec`` on ``device`` (``host`` for a tensor recorded on the host)."""
    torch = import_torch("lumos bench")
    dtype = dtype_of(spec.dtype)
    where = device if spec.on_gpu else host
    if spec.strides is not None and any(s < 0 for s in spec.strides):
        strides = None
    else:
        strides = spec.strides
    if strides is not None:
        t = torch.empty_strided(spec.shape, strides, dtype=dtype, device=where)
    else:
        t = torch.empty(spec.shape, dtype=dtype, device=where)
    if t.numel() == 0:
        return t
    if dtype.is_floating_point or dtype.is_complex:
        if dtype.itemsize == 1:  # float8: no random kernels; fill through a wider type
            t.copy_(torch.full(t.shape, 0.75, device=where))
        else:
            t.uniform_(0.5, 1.0)
    else:
        t.zero_()
    return t
