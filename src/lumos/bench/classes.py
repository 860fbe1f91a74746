"""The class of an op, by name: what ``lumos bench`` compares source and executed runs by.

Framework ops (``aten::addmm``, ``aten::add_``, ``c10d::allreduce_``), GPU kernels and the class
names of synthetic or obfuscated traces (``cpu.gemm#12``) all get one of :data:`OP_CLASSES`:

=================  ==========================================================================
class              ops
=================  ==========================================================================
``gemm``           matrix products: ``mm``, ``addmm``, ``bmm``, ``baddbmm``, ``matmul``,
                   ``linear``, ``einsum``; GEMM kernels
``conv``           convolutions and their backward
``attention``      fused attention (``scaled_dot_product_*``, flash kernels)
``elementwise``    one output element per input element: arithmetic, activations and their
                   backward, ``fill_``/``zero_``, dropout, the ``_foreach_*`` optimizer ops
``reduction``      sums, means, norms (layer, batch, RMS), softmax, losses
``copy``           copies and layout changes that move data: ``copy_``, ``to``, ``clone``,
                   ``cat``, ``index_select``, ``embedding``, memcpy
``memory``         allocation and views that move no data: ``empty``, ``view``, ``as_strided``
``communication``  collectives and transfers (``c10d::``, ``gloo:``, ``nccl:``, NCCL kernels)
``comm_wait``      no op's class: the time a collective of a several-rank run spent waiting
                   for its other ranks (:func:`lumos.bench.compare.split_waiting`)
``other``          anything else
=================  ==========================================================================

PyTorch's own CUDA kernels get the class their template is named for (``elementwise_kernel``,
``multi_tensor_apply_kernel``: elementwise; ``reduce_kernel``, layer-norm and softmax kernels:
reduction; ``CatArrayBatchedCopy``, gather and embedding kernels: copy).

>>> [op_class(n) for n in ("aten::addmm", "aten::gelu_backward", "c10d::allreduce_")]
['gemm', 'elementwise', 'communication']
>>> [op_class(n) for n in ("aten::native_layer_norm", "aten::empty_strided", "cpu.gemm#3")]
['reduction', 'memory', 'gemm']
>>> op_class("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>")
'elementwise'
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["OP_CLASSES", "op_class"]

#: Every class, in the order reports list them.
OP_CLASSES = ("gemm", "conv", "attention", "elementwise", "reduction", "copy", "memory",
              "communication", "comm_wait", "other")  # fmt: skip

_COMM = re.compile(r"^(c10d::|gloo:|nccl:|rccl:|ucc:|mpi:|record_param_comms)|nccl[A-Z]|"
                   r"all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|broadcast|"
                   r"^comm\.|^cpu_comm\.|^cpu\.comm", re.I)  # fmt: skip
_BASE = re.compile(r"^(?:[\w.]+::)?([A-Za-z_][\w]*?)(?:\.\w+)?$")

_GEMM = {"mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "einsum", "addmv", "mv",
         "dot", "_addmm_activation", "mkldnn_linear", "_int_mm", "_scaled_mm"}  # fmt: skip
_ELEMENTWISE = re.compile(
    r"^(_foreach_\w+|add|sub|rsub|mul|div|neg|abs|sign|exp|exp2|expm1|log|log2|log1p|sqrt|rsqrt|"
    r"pow|reciprocal|sin|cos|tanh|sigmoid|relu|relu6|leaky_relu|gelu|silu|mish|elu|selu|"
    r"hardtanh|hardswish|hardsigmoid|softplus|threshold|clamp|clamp_min|clamp_max|clip|where|"
    r"masked_fill|lerp|addcmul|addcdiv|fill|zero|ones_like|zeros_like|full_like|zeros|ones|"
    r"full|eq|ne|lt|le|gt|ge|logical_\w+|bitwise_\w+|maximum|minimum|floor|ceil|round|trunc|"
    r"erf|erfinv|native_dropout|dropout|bernoulli|uniform|normal|random|randint|rand|randn|"
    r"arange|isnan|isinf|nan_to_num|square|glu|copysign|fmod|remainder|frac|"
    r"\w+_backward|\w+_backward_data|threshold_backward)_?$"
)
_REDUCTION = re.compile(
    r"^(sum|mean|prod|amax|amin|max|min|argmax|argmin|var|std|var_mean|std_mean|norm|"
    r"linalg_vector_norm|\w*layer_norm\w*|\w*batch_norm\w*|\w*group_norm\w*|\w*rms_norm\w*|"
    r"_?softmax|_?log_softmax|logsumexp|cumsum|cumprod|nll_loss\w*|cross_entropy\w*|"
    r"mse_loss|l1_loss|binary_cross_entropy\w*|topk|sort|all|any|count_nonzero)_?$"
)
_COPY = re.compile(
    r"^(copy|_to_copy|to|clone|contiguous|cat|stack|index|index_select|index_put|index_add|"
    r"gather|scatter|scatter_add|embedding|embedding_dense_backward|embedding_backward|"
    r"_embedding_bag\w*|embedding_bag|repeat|tile|flip|roll|pad|constant_pad_nd|"
    r"masked_select|nonzero|take|put|_unsafe_index\w*|flatten_dense_tensors|"
    r"unflatten_dense_tensors|slice_backward|select_backward|narrow_copy|tril|triu|"
    r"_local_scalar_dense|item|lift_fresh_copy|memcpy\w*)_?$"
)
_MEMORY = re.compile(
    r"^(empty|empty_strided|empty_like|new_empty|new_empty_strided|view|_unsafe_view|reshape|"
    r"as_strided|expand|expand_as|t|transpose|permute|unsqueeze|squeeze|select|slice|narrow|"
    r"split|split_with_sizes|chunk|unbind|detach|alias|resize|lift_fresh|view_as|flatten|"
    r"unflatten|resolve_conj|resolve_neg|set|_reshape_alias|numpy_T|movedim|unfold|"
    r"_has_compatible_shallow_copy_type|requires_grad|record_stream|is_nonzero|"
    r"memset\w*|alloc\w*)_?$"
)
_CONV = re.compile(r"conv|implicit_gemm|dgrad|wgrad|winograd", re.I)
_ATTN = re.compile(r"scaled_dot_product|flash|fmha|attention|attn|sdpa", re.I)
_GEMM_KERNEL = re.compile(r"(?<!fb)gemm|cublas|cutlass|xmma|gemv|matmul", re.I)
# PyTorch's own CUDA kernels, by what their templates are named for
_KERNELS = (
    ("reduction", re.compile(r"reduce_kernel|layer_norm|LayerNorm|GammaBeta|RowwiseMoments|"
                             r"SoftMax|softmax|nll_loss|batch_norm|radix_sort|cub::")),
    ("copy", re.compile(r"CatArrayBatchedCopy|gather_kernel|scatter|index_|indexing|embedding|"
                        r"compute_grad_weight|sum_and_scatter|copy_kernel|direct_copy")),
    ("elementwise", re.compile(r"elementwise_kernel|multi_tensor_apply|Functor|fused_dropout")),
)  # fmt: skip
#: Synthetic and obfuscated names: an op class of :mod:`lumos.synth.classes`, then ``#id``.
_SYNTH = re.compile(r"^(?:cpu\.|comm\.|cpu_comm\.)?(\w+)(?:\.\w+)?#\d+$")
_SYNTH_MAP = {"gemm": "gemm", "conv": "conv", "attention": "attention", "norm": "reduction",
              "reduction": "reduction", "elementwise": "elementwise", "copy": "copy",
              "embedding": "copy", "memcpy": "copy", "memset": "memory", "alloc": "memory",
              "sort": "reduction", "optimizer": "elementwise"}  # fmt: skip


@lru_cache(maxsize=65536)
def op_class(name: str) -> str:
    """The class of an op, kernel or synthetic task name (see the module docstring)."""
    if _COMM.search(name):
        return "communication"
    synth = _SYNTH.match(name)
    if synth:
        return _SYNTH_MAP.get(synth.group(1), "other")
    m = _BASE.match(name.strip())
    base = m.group(1) if m else ""
    if base in _GEMM:
        return "gemm"
    if base and _CONV.search(base):
        return "conv"
    if base and _ATTN.search(base):
        return "attention"
    for label, pattern in (("memory", _MEMORY), ("reduction", _REDUCTION), ("copy", _COPY),
                           ("elementwise", _ELEMENTWISE)):  # fmt: skip
        if base and pattern.match(base):
            return label
    # a kernel's name (``ampere_sgemm_128x64_nn``, ``void cutlass::Kernel<...>``)
    for label, pattern in (("conv", _CONV), ("attention", _ATTN), ("gemm", _GEMM_KERNEL),
                           *_KERNELS):  # fmt: skip
        if pattern.search(name):
            return label
    return "other"
