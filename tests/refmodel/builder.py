"""Op templates that draw every random quantity of a program from one seeded RNG.

A :class:`Builder` is used once per (scenario, seed): templates are called in a fixed order and
each draw is an integer number of ns, uniform on ``[lo, hi]`` microseconds. Nothing here knows
about scale factors, so every run of one seed gets the same program.

Cost ranges follow what real traces show: a launch call 3-8 us, launch latency 5-10 us (one
value per program), event record/wait 1-3 us, a sync call's own cost 2-5 us and its reaction
2-5 us, an autograd op's dispatch 8-30 us.
"""

from __future__ import annotations

import random
from typing import Any

from .program import (
    COMPUTE_STREAM,
    DEVICE_SYNC,
    EVENT_RECORD,
    LAUNCH,
    MEMCPY,
    MEMCPY_ASYNC,
    MEMSET_ASYNC,
    STREAM_SYNC,
    STREAM_WAIT_EVENT,
    Call,
    Collective,
    Cpu,
    Node,
    Op,
    Work,
)

__all__ = ["Builder", "elementwise_kernel"]

GEMM_FWD = "sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x16_stage4_warpsize2x2x1_tensor16x8x8_kernel"
GEMM_DGRAD = "sm80_xmma_gemm_f32f32_tf32f32_f32_nt_n_tilesize128x128x16_stage4_warpsize2x2x1_tensor16x8x8_kernel"
GEMM_WGRAD = "sm80_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize64x128x16_stage4_warpsize2x2x1_tensor16x8x8_kernel"
LAYER_NORM = (
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>"
    "(int, float, float const*, float const*, float const*, float*, float*, float*)"
)
LAYER_NORM_BWD = (
    "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<float, float>"
    "(float const*, float const*, float const*, float const*, float const*, float*, int)"
)
SOFTMAX = (
    "void (anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
    "(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)"
)
SOFTMAX_BWD = (
    "void (anonymous namespace)::cunn_SoftMaxBackward<4, float, float, float, "
    "(anonymous namespace)::SoftMaxBackwardEpilogue>(float*, float const*, float const*, int)"
)
SUM_REDUCE = (
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
    "at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()"
    "(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4> >"
    "(at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, "
    "float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, "
    "float, 4>)"
)
ADAM = (
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
    "namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor"
    "<float, 4, (at::native::ADAM_MODE)1, false>, float*, double, double, double, double, double, "
    "bool, float*, float*>(at::native::(anonymous namespace)::TensorListMetadata<4>, "
    "at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, "
    "false>, float*, double, double, double, double, double, bool, float*, float*)"
)
NLL_LOSS = (
    "void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, "
    "long>(float*, float*, float const*, long const*, float const*, bool, long, long, long, long)"
)
NCCL_ALLREDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
GELU = (
    "at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}"
    "::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}"
)
GELU_BWD = (
    "at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::"
    "{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float, float)#1}"
)
ADD = "at::native::CUDAFunctor_add<float>"
MUL = "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >"
FILL = "at::native::FillFunctor<float>"
Tape = tuple[int, str, list[tuple[str, str, float, float]]]
WORLD = 8
ALPHA_NS = 12_000
BUS_BYTES_PER_S = 40e9


def elementwise_kernel(functor: str, nargs: int = 3) -> str:
    """PyTorch's vectorized elementwise kernel name for ``functor``."""
    arr = f"std::array<char*, {nargs}ul>"
    return f"void at::native::vectorized_elementwise_kernel<4, {functor}, {arr} >(int, {functor}, {arr})"


class Builder:
    """Program templates over one ``random.Random(seed)``; see the module docstring.

    ``tape`` collects, for each forward autograd op, ``(seq, grad_fn, kernels)`` with
    ``kernels`` a list of ``(aten op, kernel name, lo_us, hi_us)`` (empty for a grad_fn that
    only passes gradients on): :meth:`backward` turns a slice of it into the backward thread's
    ops.
    """

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.launch_latency_ns = self.ns(5, 10)
        self.tape: list[Tape] = []
        self._seq = 1000
        self._coll_seq = 0
        self._event = 0

    # ---- draws and primitives -------------------------------------------------------------
    def ns(self, lo_us: float, hi_us: float) -> int:
        """A duration uniform on ``[lo_us, hi_us]`` microseconds, in integer ns."""
        return self.rng.randint(round(lo_us * 1000), round(hi_us * 1000))

    def gap(self, lo: float = 2, hi: float = 8) -> Cpu:
        """Untraced Python time between ops."""
        return Cpu(self.ns(lo, hi))

    def op(
        self,
        name: str,
        *children: Node,
        pre: tuple[float, float] = (3, 8),
        post: tuple[float, float] = (1, 3),
        cat: str = "cpu_op",
        args: dict[str, Any] | None = None,
        autograd: bool = False,
    ) -> Op:
        """A traced span; ``autograd`` gives it the next "Sequence number" and a tape entry
        is the caller's business."""
        seq = -1
        if autograd:
            self._seq += 1
            seq = self._seq
        return Op(
            name,
            tuple(children),
            self.ns(*pre),
            self.ns(*post),
            cat,
            dict(args or {}),
            seq,
            0 if autograd else -1,
        )

    def cpu_op(self, name: str, lo: float, hi: float, **args: Any) -> Op:
        """A CPU-only op costing ``[lo, hi]`` us (all of it before its end)."""
        return Op(name, (), self.ns(lo, hi), 0, "cpu_op", args)

    def kernel(
        self, name: str, lo: float, hi: float, grid: tuple[int, int, int] = (1024, 1, 1)
    ) -> Work:
        return Work(name, "kernel", self.ns(lo, hi), grid, (128, 1, 1))

    def launch(self, work: Work, stream: int = COMPUTE_STREAM) -> Call:
        return Call(LAUNCH, self.ns(3, 8), stream, work, latency_ns=self.launch_latency_ns)

    def event(self) -> str:
        self._event += 1
        return f"ev{self._event}"

    def event_record(self, event: str, stream: int) -> Call:
        return Call(EVENT_RECORD, self.ns(1, 3), stream, event=event)

    def stream_wait(self, stream: int, event: str) -> Call:
        return Call(STREAM_WAIT_EVENT, self.ns(1, 3), stream, event=event)

    def stream_sync(self, stream: int = COMPUTE_STREAM) -> Call:
        return Call(STREAM_SYNC, self.ns(2, 5), stream, reaction_ns=self.ns(2, 5))

    def device_sync(self) -> Call:
        return Call(DEVICE_SYNC, self.ns(2, 5), reaction_ns=self.ns(2, 5))

    # ---- forward ops -------------------------------------------------------------------------
    def linear(self, m: int, n: int, k: int, us: tuple[float, float]) -> Op:
        """``aten::linear`` = ``aten::t`` (CPU only) + ``aten::addmm`` launching one GEMM."""
        t = self.op(
            "aten::t",
            self.op("aten::transpose", self.cpu_op("aten::as_strided", 1, 3), pre=(2, 5)),
            pre=(2, 4),
        )
        gemm = Work(GEMM_FWD, "kernel", self.ns(*us), (max(1, n // 128), max(1, m // 128), 1))
        addmm = self.op("aten::addmm", self.launch(gemm), pre=(8, 20), post=(2, 6))
        dims = {"Input Dims": [[m, k], [n, k], [n]], "Input type": ["float", "float", "float"]}
        lin = self.op("aten::linear", t, addmm, pre=(4, 10), args=dims, autograd=True)
        grads = [("aten::mm", GEMM_DGRAD, *us), ("aten::mm", GEMM_WGRAD, *us)]
        self.tape.append((lin.seq, "AddmmBackward0", grads))
        return lin

    def elementwise(
        self,
        name: str,
        functor: str,
        us: tuple[float, float],
        grad: tuple[str, str, str] | None,
    ) -> Op:
        """One op launching one elementwise kernel; ``grad`` = (grad_fn, backward aten op,
        backward functor), the op and functor empty for a pass-through grad_fn."""
        k = self.kernel(elementwise_kernel(functor), *us)
        o = self.op(name, self.launch(k), pre=(8, 20), post=(2, 5), autograd=grad is not None)
        if grad is not None:
            fn, aten, bwd_functor = grad
            kernels = [(aten, elementwise_kernel(bwd_functor), *us)] if aten else []
            self.tape.append((o.seq, fn, kernels))
        return o

    def layer_norm(self, us: tuple[float, float]) -> Op:
        k = self.kernel(LAYER_NORM, *us)
        inner = self.op(
            "aten::native_layer_norm",
            self.cpu_op("aten::empty", 2, 5),
            self.cpu_op("aten::empty", 2, 5),
            self.launch(k),
            pre=(6, 15),
        )
        o = self.op("aten::layer_norm", inner, pre=(3, 8), autograd=True)
        grads = [("aten::native_layer_norm_backward", LAYER_NORM_BWD, *us)]
        self.tape.append((o.seq, "NativeLayerNormBackward0", grads))
        return o

    def softmax(self, us: tuple[float, float]) -> Op:
        inner = self.op("aten::_softmax", self.launch(self.kernel(SOFTMAX, *us)), pre=(6, 15))
        o = self.op("aten::softmax", inner, pre=(3, 8), autograd=True)
        grads = [("aten::_softmax_backward_data", SOFTMAX_BWD, *us)]
        self.tape.append((o.seq, "SoftmaxBackward0", grads))
        return o

    def view(self, name: str = "aten::view", lo: float = 2, hi: float = 6) -> Op:
        return self.cpu_op(name, lo, hi)

    def mlp_layer(
        self, d: int, gemm_us: tuple[float, float], ew_us: tuple[float, float]
    ) -> list[Node]:
        """layer_norm, linear, gelu, linear, residual add, view (with Python gaps)."""
        return [
            self.layer_norm(ew_us),
            self.gap(),
            self.linear(4096, 4 * d, d, gemm_us),
            self.gap(),
            self.elementwise(
                "aten::gelu", GELU, ew_us, ("GeluBackward0", "aten::gelu_backward", GELU_BWD)
            ),
            self.gap(),
            self.linear(4096, d, 4 * d, gemm_us),
            self.gap(),
            self.elementwise("aten::add", ADD, ew_us, ("AddBackward0", "", "")),
            self.view(),
            self.gap(),
        ]

    def loss(self, us: tuple[float, float]) -> Op:
        inner = self.op("aten::nll_loss_forward", self.launch(self.kernel(NLL_LOSS, *us)))
        o = self.op("aten::cross_entropy_loss", self.softmax(us), inner, autograd=True)
        grads = [("aten::nll_loss_backward", elementwise_kernel(FILL, 1), *us)]
        self.tape.append((o.seq, "NllLossBackward0", grads))
        return o

    # ---- syncs and copies --------------------------------------------------------------------
    def item(self, stream: int = COMPUTE_STREAM) -> Op:
        """``.item()``: a 4-byte DtoH copy on ``stream`` then ``cudaStreamSynchronize``."""
        copy = Work("Memcpy DtoH (Device -> Pageable)", "gpu_memcpy", self.ns(1, 2.5), nbytes=4)
        call = Call(MEMCPY_ASYNC, self.ns(4, 10), stream, copy, latency_ns=self.launch_latency_ns)
        dense = self.op("aten::_local_scalar_dense", call, self.stream_sync(stream), pre=(3, 8))
        return self.op("aten::item", dense, pre=(2, 5), post=(1, 2))

    def to_host(self, nbytes: int, us: tuple[float, float], stream: int = COMPUTE_STREAM) -> Op:
        """``tensor.cpu()`` through a blocking ``cudaMemcpy`` (returns after its copy ends)."""
        copy = Work("Memcpy DtoH (Device -> Pageable)", "gpu_memcpy", self.ns(*us), nbytes=nbytes)
        call = Call(
            MEMCPY,
            self.ns(5, 12),
            stream,
            copy,
            latency_ns=self.launch_latency_ns,
            reaction_ns=self.ns(2, 5),
        )
        copy_ = self.op("aten::copy_", call, pre=(4, 10))
        inner = self.op("aten::_to_copy", self.cpu_op("aten::empty_strided", 3, 8), copy_)
        return self.op("aten::to", inner, pre=(2, 5))

    # ---- backward, collectives, optimizer ------------------------------------------------------
    def backward(self, tape: list[Tape]) -> list[Node]:
        """Backward-thread ops for ``tape`` (forward order), in reverse, with Python gaps."""
        out: list[Node] = []
        for seq, grad_fn, kernels in reversed(tape):
            ops = [
                self.op(aten, self.launch(self.kernel(name, lo, hi)), pre=(6, 14))
                for aten, name, lo, hi in kernels
            ]
            inner = self.op(grad_fn, *ops)
            out.append(
                Op(
                    f"autograd::engine::evaluate_function: {grad_fn}",
                    (inner,),
                    self.ns(4, 10),
                    self.ns(2, 6),
                    "cpu_op",
                    {},
                    seq,
                    1,
                )
            )
            out.append(self.gap(1, 4))
        return out

    def allreduce(
        self, nelems: int, lateness_us: tuple[float, float], p_zero: float, compute: int, comm: int
    ) -> Op:
        """DDP bucket all-reduce: record an event on ``compute``, make ``comm`` wait for it, launch
        the NCCL kernel on ``comm``. The peer lateness is 0 with probability ``p_zero``."""
        late = self.ns(*lateness_us)
        if self.rng.random() < p_zero:
            late = 0
        nbytes = 4 * nelems
        transfer = ALPHA_NS + round(2 * (WORLD - 1) / WORLD * nbytes * 1e9 / BUS_BYTES_PER_S)
        coll = Collective("allreduce", nelems, "Float", 4, WORLD, self._coll_seq, late, transfer)
        self._coll_seq += 1
        work = Work(NCCL_ALLREDUCE, "kernel", 0, (8, 1, 1), (544, 1, 1), nbytes, coll)
        ev = self.event()
        meta = {
            "Collective name": "allreduce",
            "In msg nelems": nelems,
            "Out msg nelems": nelems,
            "dtype": "Float",
            "Group size": WORLD,
            "Process Group Name": "0",
            "Process Group Description": "default_pg",
            "Process Group Ranks": str(list(range(WORLD))),
            "Rank": 0,
            "Seq": coll.seq,
            "In split size": "[]",
            "Out split size": "[]",
            "Global rank start": 0,
            "Global rank stride": 1,
        }
        ann = self.op(
            "nccl:all_reduce",
            self.event_record(ev, compute),
            self.stream_wait(comm, ev),
            self.launch(work, comm),
            cat="user_annotation",
        )
        rpc = self.op("record_param_comms", ann, pre=(5, 10), post=(3, 6), args=meta)
        return self.op("c10d::allreduce_", rpc, pre=(10, 20), post=(5, 10))

    def optimizer_step(self, n: int, us: tuple[float, float], found_inf: bool = False) -> Op:
        """``Optimizer.step#AdamW.step``: ``n`` fused multi-tensor Adam launches, after zeroing
        a grad scaler's ``found_inf`` flag with ``cudaMemsetAsync`` when ``found_inf``."""
        ops: list[Node] = []
        if found_inf:
            fill = Work("Memset (Device)", "gpu_memset", self.ns(1, 2), nbytes=4)
            lat = self.launch_latency_ns
            call = Call(MEMSET_ASYNC, self.ns(3, 6), COMPUTE_STREAM, fill, latency_ns=lat)
            ops += [self.op("aten::zero_", self.op("aten::fill_", call)), self.gap(2, 6)]
        for _ in range(n):
            ops.append(
                self.op("aten::_fused_adamw_", self.launch(self.kernel(ADAM, *us)), pre=(10, 25))
            )
            ops.append(self.gap(2, 6))
        return self.op("Optimizer.step#AdamW.step", *ops, pre=(20, 40), cat="user_annotation")

    def zero_grad(self) -> Op:
        """``Optimizer.zero_grad`` with ``set_to_none``: CPU only."""
        return self.op(
            "Optimizer.zero_grad#AdamW.zero_grad", pre=(30, 80), post=(2, 5), cat="user_annotation"
        )

    def dataloader(self, lo: float, hi: float) -> Op:
        """``next(iter(loader))`` on the main thread: CPU only (collate via ``aten::stack``)."""
        stack = self.op("aten::stack", self.cpu_op("aten::cat", lo / 8, hi / 8), pre=(5, 10))
        return self.op(
            "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
            stack,
            pre=(lo, hi),
            post=(5, 15),
            cat="user_annotation",
        )

    def step(self, n: int, *body: Node) -> Op:
        """The ``ProfilerStep#n`` span around one iteration of the main thread."""
        return self.op(f"ProfilerStep#{n}", *body, pre=(5, 15), post=(2, 5), cat="user_annotation")
