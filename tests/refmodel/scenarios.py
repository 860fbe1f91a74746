"""Preset programs: one function per scenario, each 4 steps of 1-30 ms on one rank.

Every scenario is a function ``Builder -> Program``; :data:`SCENARIOS` lists them in order.
Threads: the main thread (tid = pid), the autograd backward thread (``pt_autograd_0``) where
a scenario has a backward pass, and a polling thread where it has DeepEP-style dispatch.
Streams: compute 7, NCCL 24, side stream 28.
"""

from __future__ import annotations

from collections.abc import Callable

from .builder import ADAM, GEMM_FWD, Builder
from .program import (
    AUX_STREAM,
    COMM_STREAM,
    COMPUTE_STREAM,
    Node,
    Op,
    Poll,
    Program,
    Signal,
    Thread,
    Wait,
    Work,
)

__all__ = ["FIRST_STEP", "SCENARIOS", "build_program"]

PID = 731406
BWD_TID = PID + 27
POLL_TID = PID + 41
FIRST_STEP = 5
N_STEPS = 4
NOTIFY = (
    "void deep_ep::intranode::notify_dispatch<8>(int const*, int*, int, int const*, int*, int, "
    "int, int, bool const*, int*, int*, int, void**, int**, int)"
)
DISPATCH = (
    "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*, long*, float*, int*, "
    "int*, int4 const*, float const*, long const*, float const*, bool const*, int const*, int, "
    "int, int, int, int, int, int, void**, int, int, int)"
)
COMBINE = (
    "void deep_ep::intranode::combine<float, 8, 768>(float*, float*, int*, float const*, "
    "float const*, int const*, int const*, int const*, int, int, int, void**, int, int, int)"
)


def _main(b: Builder, bodies: list[list[Node]]) -> Thread:
    """The main thread: a short lead-in, then one ProfilerStep span per body."""
    nodes: list[Node] = [b.gap(10, 20)]
    for i, body in enumerate(bodies):
        nodes.append(b.step(FIRST_STEP + i, *body))
        nodes.append(b.gap(8, 20))
    return Thread("pt_main_thread", PID, tuple(nodes))


def _take_tape(b: Builder) -> list:
    tape = list(b.tape)
    b.tape.clear()
    return tape


def _backward(
    b: Builder, k: int, buckets: list[tuple[int, int]], bwd: list[Node], join: bool = True
) -> Op:
    """Main thread's side of ``loss.backward()`` in step ``k``; appends the backward thread's
    side to ``bwd``. ``buckets``: (number of tape entries from the end, nelems) per DDP bucket,
    each all-reduced on the NCCL stream right after its grads are launched; with ``join`` the
    compute stream then waits for the NCCL stream before the optimizer (else the caller must
    synchronize)."""
    tape = _take_tape(b)
    bwd.append(Wait(f"bwd_start:{k}", b.ns(10, 30)))
    end = len(tape)
    for count, nelems in buckets:
        bwd.extend(b.backward(tape[max(0, end - count) : end]))
        end = max(0, end - count)
        bwd.append(b.allreduce(nelems, (0, 400), 0.5, COMPUTE_STREAM, COMM_STREAM))
        bwd.append(b.gap(3, 10))
    bwd.extend(b.backward(tape[:end]))
    if join:
        ev = b.event()
        bwd += [b.event_record(ev, COMM_STREAM), b.stream_wait(COMPUTE_STREAM, ev)]
    bwd.append(Signal(f"bwd_done:{k}"))
    return b.op(
        "torch.autograd.backward",
        Signal(f"bwd_start:{k}"),
        Wait(f"bwd_done:{k}", b.ns(5, 20)),
        pre=(5, 15),
        post=(3, 8),
    )


def _dispatch(b: Builder, k: int, poll: list[Node]) -> list[Node]:
    """DeepEP-style MoE dispatch in step ``k`` (main thread's nodes returned, the polling
    thread's appended to ``poll``): main launches ``notify_dispatch`` on the side stream; the
    polling thread spins until it ends, launches ``dispatch`` and records an event; main waits
    for that hand-off, makes the compute stream wait for the event, and runs the experts."""
    ev_in, ev_out = b.event(), b.event()
    notify = Work(NOTIFY, "kernel", b.ns(15, 40), (8, 1, 1), (768, 1, 1), tag=f"notify:{k}")
    launch_notify = b.op(
        "deep_ep::Buffer::get_dispatch_layout",
        b.event_record(ev_in, COMPUTE_STREAM),
        b.stream_wait(AUX_STREAM, ev_in),
        b.launch(notify, AUX_STREAM),
        pre=(10, 25),
    )
    dispatch = Work(DISPATCH, "kernel", b.ns(80, 160), (24, 1, 1), (768, 1, 1))
    poll.append(Poll(f"notify:{k}", b.ns(5, 70)))
    poll.append(
        b.op(
            "deep_ep::Buffer::intranode_dispatch",
            b.cpu_op("aten::empty", 3, 8),
            b.cpu_op("aten::empty", 3, 8),
            b.launch(dispatch, AUX_STREAM),
            b.event_record(ev_out, AUX_STREAM),
            pre=(15, 40),
        )
    )
    poll.append(Signal(f"dispatched:{k}"))
    wait = b.op(
        "deep_ep::EventHandle::current_stream_wait",
        Wait(f"dispatched:{k}", b.ns(3, 10)),
        b.stream_wait(COMPUTE_STREAM, ev_out),
    )
    experts: list[Node] = [
        b.linear(2048, 2048, 1024, (60, 120)),
        b.gap(),
        b.linear(2048, 1024, 2048, (60, 120)),
    ]
    ev_c, ev_back = b.event(), b.event()
    combine = Work(COMBINE, "kernel", b.ns(60, 120), (24, 1, 1), (768, 1, 1))
    combine_op = b.op(
        "deep_ep::Buffer::intranode_combine",
        b.event_record(ev_c, COMPUTE_STREAM),
        b.stream_wait(AUX_STREAM, ev_c),
        b.launch(combine, AUX_STREAM),
        b.event_record(ev_back, AUX_STREAM),
        b.stream_wait(COMPUTE_STREAM, ev_back),
        pre=(10, 25),
    )
    return [
        launch_notify,
        b.gap(),
        b.cpu_op("aten::split_with_sizes", 20, 45),
        b.view("aten::reshape", 5, 15),
        wait,
        *experts,
        b.gap(),
        combine_op,
        b.gap(),
    ]


def _backlog(b: Builder, n: int) -> tuple[tuple[int, Work], ...]:
    """The previous step's tail still queued on the compute stream at window open."""
    out = []
    for i in range(n):
        adam = i % 3 == 2
        w = b.kernel(ADAM, 60, 100) if adam else b.kernel(GEMM_FWD, 150, 300, (32, 8, 1))
        out.append((COMPUTE_STREAM, w))
    return tuple(out)


def gpu_bound(b: Builder) -> Program:
    """Forward (4 layers of large GEMMs) + optimizer on the main thread, no backward; the CPU
    runs far ahead and ``torch.cuda.synchronize()`` ends each step."""
    bodies = []
    for _ in range(N_STEPS):
        body: list[Node] = [b.zero_grad(), b.gap()]
        for _ in range(4):
            body += b.mlp_layer(1024, (300, 500), (100, 160))
        body += [b.loss((100, 150)), b.gap(), b.optimizer_step(4, (150, 250)), b.device_sync()]
        _take_tape(b)
        bodies.append(body)
    return Program("gpu_bound", (_main(b, bodies),), pid=PID)


def _shape_ops(b: Builder) -> list[Node]:
    return [
        b.view("aten::reshape", 15, 35),
        b.view("aten::contiguous", 10, 25),
        b.view("aten::split", 15, 40),
        b.view(),
    ]


def cpu_bound(b: Builder) -> Program:
    """Tiny kernels (2-6 us) under heavy CPU-only work (data loading, shape ops) and Python;
    a loss ``.item()`` ends each step."""
    bodies = []
    for _ in range(N_STEPS):
        body: list[Node] = [b.dataloader(600, 900), b.gap(), b.zero_grad(), b.gap()]
        for _ in range(3):
            body += _shape_ops(b)
            body += b.mlp_layer(256, (3, 6), (2, 4))
        body += [b.loss((2, 4)), b.gap(), b.optimizer_step(2, (3, 6)), b.gap(), b.item()]
        _take_tape(b)
        bodies.append(body)
    return Program("cpu_bound", (_main(b, bodies),), pid=PID)


def backward_thread_nccl(b: Builder) -> Program:
    """Forward on the main thread; backward on the autograd thread with two DDP buckets whose
    NCCL all-reduces overlap the rest of backward; optimizer after the compute stream waits for
    the NCCL stream; loss ``.item()`` at step end."""
    bodies: list[list[Node]] = []
    bwd: list[Node] = []
    for k in range(N_STEPS):
        body: list[Node] = [b.zero_grad(), b.gap()]
        for _ in range(4):
            body += b.mlp_layer(1024, (150, 250), (20, 40))
        body += [b.loss((10, 20)), b.gap()]
        body += [_backward(b, k, [(12, 4_000_000), (10, 3_000_000)], bwd), b.gap()]
        body += [b.optimizer_step(4, (60, 100), found_inf=True), b.gap(), b.item()]
        bodies.append(body)
    threads = (_main(b, bodies), Thread("pt_autograd_0", BWD_TID, tuple(bwd)))
    return Program("backward_thread_nccl", threads, pid=PID)


def nccl_critical_path(b: Builder) -> Program:
    """Communication-bound data parallelism: the backward thread all-reduces three large DDP
    buckets on the NCCL stream (about 1-2 ms each, longer than the backward compute after
    them); the main thread ends the backward with ``torch.cuda.synchronize()``, so the last
    all-reduce holds the optimizer and the step."""
    bodies: list[list[Node]] = []
    bwd: list[Node] = []
    for k in range(N_STEPS):
        body: list[Node] = [b.zero_grad(), b.gap()]
        for _ in range(4):
            body += b.mlp_layer(1024, (100, 200), (15, 30))
        body += [b.loss((10, 20)), b.gap()]
        buckets = [(9, 8_000_000), (9, 10_000_000), (9, 6_000_000)]
        body += [_backward(b, k, buckets, bwd, join=False), b.gap(), b.device_sync(), b.gap()]
        body += [b.optimizer_step(4, (60, 100)), b.gap(), b.item()]
        bodies.append(body)
    threads = (_main(b, bodies), Thread("pt_autograd_0", BWD_TID, tuple(bwd)))
    return Program("nccl_critical_path", threads, pid=PID)


def gpu_clock_lags_ms(b: Builder) -> Program:
    """``gpu_bound`` with the GPU clock 2.5 ms behind the CPU's: every kernel appears to start
    milliseconds before its launch, and launches onto an idle stream are rare (one per step)."""
    p = gpu_bound(b)
    return Program("gpu_clock_lags_ms", p.threads, p.backlog, gpu_clock_lag_ns=2_500_000, pid=PID)


def gpu_clock_leads_ms(b: Builder) -> Program:
    """``backward_thread_nccl`` with the GPU clock 20 ms ahead of the CPU's: every launch
    appears to take 20 ms, which only the synchronizations can tell from a deep queue."""
    p = backward_thread_nccl(b)
    return Program("gpu_clock_leads_ms", p.threads, p.backlog, gpu_clock_lag_ns=-20_000_000,
                   pid=PID)  # fmt: skip


def gpu_clock_drifts(b: Builder) -> Program:
    """``item_syncs`` with the GPU clock 1.5 ms behind and drifting 2,000 ppm (about 60 us
    over the window): no single offset fits every launch and synchronization."""
    p = item_syncs(b)
    return Program("gpu_clock_drifts", p.threads, p.backlog, gpu_clock_lag_ns=1_500_000,
                   pid=PID, gpu_clock_drift_ppm=2_000.0)  # fmt: skip


def item_syncs(b: Builder) -> Program:
    """Mid-step ``.item()`` (isfinite check), a blocking ``cudaMemcpy`` of activations to host,
    loss ``.item()``, and an explicit ``cudaStreamSynchronize`` at step end."""
    bodies = []
    for _ in range(N_STEPS):
        body: list[Node] = [b.zero_grad(), b.gap()]
        body += b.mlp_layer(768, (100, 200), (15, 30)) + b.mlp_layer(768, (100, 200), (15, 30))
        check = b.elementwise(
            "aten::isfinite", "at::native::isfinite_kernel<float>", (10, 20), None
        )
        body += [check, b.item(), b.gap(20, 40)]
        body += b.mlp_layer(768, (100, 200), (15, 30))
        body += [b.to_host(1 << 20, (80, 120)), b.gap(10, 30)]
        body += b.mlp_layer(768, (100, 200), (15, 30))
        body += [b.loss((10, 20)), b.item(), b.gap(), b.optimizer_step(3, (50, 90))]
        body += [b.gap(), b.stream_sync()]
        _take_tape(b)
        bodies.append(body)
    return Program("item_syncs", (_main(b, bodies),), pid=PID)


def queued_before_window(b: Builder) -> Program:
    """3-5 ms of kernels launched before the window are still queued at window open; the first
    step starts with ``cudaDeviceSynchronize``. No step-end sync: a loss ``.item()`` after the
    forward, the optimizer's kernels run into the next step."""
    backlog = _backlog(b, 18)
    bodies = []
    for k in range(N_STEPS):
        body: list[Node] = [b.device_sync(), b.gap()] if k == 0 else []
        body += [b.dataloader(100, 200), b.gap(), b.zero_grad(), b.gap()]
        for _ in range(3):
            body += b.mlp_layer(1024, (120, 220), (20, 40))
        body += [b.loss((10, 20)), b.item(), b.gap(), b.optimizer_step(4, (60, 100))]
        _take_tape(b)
        bodies.append(body)
    return Program("queued_before_window", (_main(b, bodies),), backlog, pid=PID)


def polling_thread(b: Builder) -> Program:
    """An MoE layer with DeepEP-style dispatch: a polling thread waits (no runtime call) for
    the ``notify_dispatch`` kernel, then launches ``dispatch``; the main thread waits for it."""
    bodies: list[list[Node]] = []
    poll: list[Node] = []
    for k in range(N_STEPS):
        body: list[Node] = [b.zero_grad(), b.gap()]
        body += b.mlp_layer(1024, (100, 200), (15, 30))
        body += [b.layer_norm((15, 30)), b.gap()]
        body += _dispatch(b, k, poll)
        body += b.mlp_layer(1024, (100, 200), (15, 30))
        body += [b.loss((10, 20)), b.gap(), b.optimizer_step(3, (50, 90)), b.item()]
        _take_tape(b)
        bodies.append(body)
    threads = (_main(b, bodies), Thread("deep_ep_poll", POLL_TID, tuple(poll)))
    return Program("polling_thread", threads, pid=PID)


def clock_lag(b: Builder) -> Program:
    """CPU-paced small model (the GPU is often idle, so kernels start right after launch) with
    GPU timestamps 30 us behind the CPU clock: many kernels appear to start before their
    launch."""
    bodies = []
    for _ in range(N_STEPS):
        body: list[Node] = [b.dataloader(200, 300), b.gap(), b.zero_grad(), b.gap()]
        for _ in range(3):
            body += b.mlp_layer(512, (20, 40), (5, 10))
        body += [b.loss((5, 10)), b.gap(), b.optimizer_step(2, (10, 20)), b.item()]
        _take_tape(b)
        bodies.append(body)
    return Program("clock_lag", (_main(b, bodies),), gpu_clock_lag_ns=30_000, pid=PID)


def mixed(b: Builder) -> Program:
    """All of the above: backlog + device sync at window open, data loading, a mid-step
    ``.item()``, DeepEP dispatch with a polling thread, backward thread with two NCCL buckets,
    a blocking copy, step-end stream sync, GPU clock 20 us behind."""
    backlog = _backlog(b, 10)
    bodies: list[list[Node]] = []
    bwd: list[Node] = []
    poll: list[Node] = []
    for k in range(N_STEPS):
        body: list[Node] = [b.device_sync(), b.gap()] if k == 0 else []
        body += [b.dataloader(300, 500), b.gap(), b.zero_grad(), b.gap()]
        body += b.mlp_layer(1024, (120, 220), (20, 40)) + b.mlp_layer(1024, (120, 220), (20, 40))
        body += [b.item(), b.gap(10, 30), b.layer_norm((20, 40)), b.gap()]
        body += _dispatch(b, k, poll)
        body += b.mlp_layer(1024, (120, 220), (20, 40))
        body += [b.loss((10, 20)), b.gap()]
        body += [_backward(b, k, [(9, 3_000_000), (9, 2_000_000)], bwd), b.gap()]
        body += [b.optimizer_step(4, (60, 100), found_inf=True), b.gap()]
        body += [b.to_host(1 << 18, (20, 40)), b.gap(), b.stream_sync()]
        bodies.append(body)
    threads = (
        _main(b, bodies),
        Thread("pt_autograd_0", BWD_TID, tuple(bwd)),
        Thread("deep_ep_poll", POLL_TID, tuple(poll)),
    )
    return Program("mixed", threads, backlog, gpu_clock_lag_ns=20_000, pid=PID)


SCENARIOS: dict[str, Callable[[Builder], Program]] = {
    f.__name__: f
    for f in (
        gpu_bound,
        cpu_bound,
        backward_thread_nccl,
        item_syncs,
        queued_before_window,
        polling_thread,
        clock_lag,
        mixed,
        nccl_critical_path,
        gpu_clock_lags_ms,
        gpu_clock_leads_ms,
        gpu_clock_drifts,
    )
}


def build_program(scenario: str, seed: int = 0) -> Program:
    """The program of ``scenario`` for ``seed`` (every random draw made here)."""
    try:
        fn = SCENARIOS[scenario]
    except KeyError:
        raise ValueError(f"unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}") from None
    return fn(Builder(seed))
