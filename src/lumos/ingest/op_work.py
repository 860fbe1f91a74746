"""The work an op does, from its recorded shapes: floating-point operations and bytes moved.

Kineto records "Input Dims" and "Input type" for CPU ops when the profiler ran with
``record_shapes=True``. For the ops below that is enough to know the arithmetic they asked the
GPU for, so a report can say how fast it went (achieved TFLOPS, GB/s):

=====================================================  ========================================
op (inputs as recorded)                                work
=====================================================  ========================================
``aten::mm`` (a[M,K], b[K,N])                          2·M·K·N flops
``aten::addmm`` (bias, a[M,K], b[K,N], ...)            2·M·K·N flops
``aten::bmm`` (a[B,M,K], b[B,K,N])                     2·B·M·K·N flops
``aten::baddbmm`` (bias, a[B,M,K], b[B,K,N], ...)      2·B·M·K·N flops
``aten::_scaled_dot_product_{flash,efficient,cudnn}``  2·B·H·L·S·(D + Dv) flops (q[B,H,L,D],
``_attention`` (q, k, v, ...)                          k[B,H,S,D], v[B,H,S,Dv]; dense, no mask)
the same ``..._attention_backward`` (grad, q, k, v)    2.5 times the forward
``aten::copy_`` (dst, src)                             bytes of dst + bytes of src
=====================================================  ========================================

GEMMs and attention also count the bytes of their inputs and output (each read or written
once), so their GB/s is a lower bound on the memory traffic. Unknown dtypes or shapes give 0.

>>> op_work("aten::mm", [[98304, 50], [50, 15]], ["float", "float"])
(147456000, 25562040)
>>> op_work("aten::copy_", [[951, 1024], [951, 1024], []], ["int", "int", "Scalar"])
(0, 7790592)
"""

from __future__ import annotations

import math
from typing import Any

from lumos.ingest.comm_names import dtype_size_bytes

__all__ = ["WORK_OPS", "dtype_bytes", "op_work"]

_GEMM = {"aten::mm": 0, "aten::addmm": 1, "aten::bmm": 0, "aten::baddbmm": 1}
_ATTN = tuple(f"aten::_scaled_dot_product_{k}_attention" for k in ("flash", "efficient", "cudnn"))
#: Ops whose shapes lumos reads (their "Input Dims" are decoded at ingest).
WORK_OPS = frozenset((*_GEMM, *_ATTN, *(f"{a}_backward" for a in _ATTN), "aten::copy_"))


def dtype_bytes(dtype: Any) -> int:
    """Bytes per element of a recorded "Input type" (0 when unknown)."""
    return dtype_size_bytes(dtype) if isinstance(dtype, str) else 0


def _shape(dims: list[Any], i: int) -> list[int] | None:
    if i >= len(dims) or not isinstance(dims[i], list):  # [] is a 0-d tensor: one element
        return None
    if not all(isinstance(d, int) and d >= 0 for d in dims[i]):
        return None
    return dims[i]


def _bytes(dims: list[Any], types: list[Any], idx: tuple[int, ...]) -> int:
    total = 0
    for i in idx:
        s = _shape(dims, i)
        size = dtype_bytes(types[i]) if i < len(types) else 0
        if s is None or not size:
            return 0
        total += math.prod(s) * size
    return total


def op_work(name: str, dims: Any, types: Any) -> tuple[int, int]:
    """``(flops, bytes)`` of one call of op ``name`` given its "Input Dims" and "Input type"
    (see the module docstring); ``(0, 0)`` when the op or its shapes are not understood."""
    if not isinstance(dims, list) or not isinstance(types, list):
        return 0, 0
    if name in _GEMM:
        i = _GEMM[name]
        a, b = _shape(dims, i), _shape(dims, i + 1)
        if a is None or b is None or len(a) != len(b) or len(a) not in (2, 3) or a[-1] != b[-2]:
            return 0, 0
        batch = a[0] if len(a) == 3 else 1
        m, k, n = a[-2], a[-1], b[-1]
        out = batch * m * n * dtype_bytes(types[i] if i < len(types) else None)
        moved = _bytes(dims, types, (i, i + 1))
        return 2 * batch * m * k * n, moved + out if moved else 0
    base = name.removesuffix("_backward")
    if base in _ATTN:
        q0 = 1 if name != base else 0  # the backward's first input is the output's gradient
        q, key, v = (_shape(dims, q0 + j) for j in range(3))
        if q is None or key is None or v is None or not len(q) == len(key) == len(v) == 4:
            return 0, 0
        bsz, heads, seq_q, d = q
        flops = 2 * bsz * heads * seq_q * key[2] * (d + v[3])
        if name != base:
            flops = flops * 5 // 2
        return flops, _bytes(dims, types, (q0, q0 + 1, q0 + 2))
    if name == "aten::copy_":
        return 0, _bytes(dims, types, (0, 1))
    return 0, 0
