"""Graphs made by hand or at random: for tests, examples and benchmarks.

:class:`GraphBuilder` is a small row-at-a-time builder (Python lists; fine for thousands of
tasks, not for millions). :func:`random_graph` generates a large valid graph vectorised: a few
threads launching kernels onto a few streams, with inter-stream edges and stream syncs.

>>> b = GraphBuilder()
>>> th, st = b.thread(1), b.stream(7)
>>> launch = b.task(th, "cudaLaunchKernel", 5)
>>> k = b.task(st, "gemm", 100)
>>> _ = b.edge(launch, k, DepKind.LAUNCH)
>>> sync = b.task(th, "cudaStreamSynchronize", 2, gap_ns=1)
>>> b.wait(sync, WaitKind.STREAM, stream=st)
>>> b.build().validate().num_tasks
3
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lumos.graph.model import (
    AnnotationKind,
    Annotations,
    Comms,
    CommType,
    DepKind,
    Edges,
    ExecGraph,
    ProcessGroup,
    ProcessorKind,
    Processors,
    TaskKind,
    Tasks,
    WaitKind,
    Waits,
)

__all__ = ["GraphBuilder", "random_graph"]


class GraphBuilder:
    """Append processors, tasks, edges, waits, comms and annotations; :meth:`build` an ExecGraph.

    Tasks are appended in processor order; each task after the first on a processor gets an
    intra-processor edge from its predecessor with ``delay_ns = gap_ns``.
    """

    def __init__(self, rank: int = 0, world_size: int = 1) -> None:
        self.rank, self.world_size = rank, world_size
        self._names: dict[str, int] = {}
        self._proc: dict[str, list[Any]] = {
            k: [] for k in ("kind", "pid", "tid", "device", "label")
        }
        self._tasks: dict[str, list[int]] = {
            k: [] for k in ("name_idx", "kind", "processor_idx", "dur_ns", "ts_ns", "comm_idx")
        }
        self._edges: dict[str, list[int]] = {k: [] for k in ("src", "dst", "kind", "delay_ns")}
        self._waits: dict[str, list[int]] = {
            k: [] for k in ("task_idx", "kind", "target_processor_idx", "device", "record_task_idx")
        }
        self._comms: dict[str, list[int]] = {
            k: [] for k in ("kind", "size_bytes", "pg_idx", "seq_id", "peer_rank", "tag", "wait_ns")
        }
        self._ann: dict[str, list[int]] = {
            k: []
            for k in (
                "name_idx", "kind", "processor_idx", "first_task_idx", "last_task_idx",
                "ts_ns", "dur_ns", "lead_ns", "tail_ns",
            )
        }  # fmt: skip
        self._pgs: list[ProcessGroup] = []
        self._last_on: dict[int, int] = {}

    def _name(self, name: str) -> int:
        return self._names.setdefault(name, len(self._names))

    def _processor(self, kind: ProcessorKind, pid: int, tid: int, device: int, label: str) -> int:
        p = self._proc
        p["kind"].append(int(kind))
        p["pid"].append(pid)
        p["tid"].append(tid)
        p["device"].append(device)
        p["label"].append(label)
        return len(p["kind"]) - 1

    def thread(self, tid: int, pid: int = 0, label: str | None = None) -> int:
        return self._processor(ProcessorKind.THREAD, pid, tid, -1, label or f"thread {tid}")

    def stream(
        self, stream_id: int, device: int = 0, pid: int | None = None, label: str | None = None
    ) -> int:
        return self._processor(
            ProcessorKind.STREAM,
            device if pid is None else pid,
            stream_id,
            device,
            label or f"stream {stream_id}",
        )

    def task(
        self,
        processor: int,
        name: str,
        dur_ns: int,
        kind: TaskKind | None = None,
        *,
        gap_ns: int = 0,
        ts_ns: int = 0,
        comm: int = -1,
    ) -> int:
        if kind is None:
            on_stream = self._proc["kind"][processor] == ProcessorKind.STREAM
            kind = TaskKind.KERNEL if on_stream else TaskKind.CPU_OP
        t = self._tasks
        idx = len(t["kind"])
        for key, value in (
            ("name_idx", self._name(name)),
            ("kind", int(kind)),
            ("processor_idx", processor),
            ("dur_ns", dur_ns),
            ("ts_ns", ts_ns),
            ("comm_idx", comm),
        ):
            t[key].append(value)
        prev = self._last_on.get(processor)
        if prev is not None:
            on_stream = self._proc["kind"][processor] == ProcessorKind.STREAM
            dep = DepKind.INTRA_STREAM if on_stream else DepKind.INTRA_THREAD
            self.edge(prev, idx, dep, gap_ns)
        self._last_on[processor] = idx
        return idx

    def edge(self, src: int, dst: int, kind: DepKind, delay_ns: int = 0) -> int:
        e = self._edges
        for key, value in (("src", src), ("dst", dst), ("kind", int(kind)), ("delay_ns", delay_ns)):
            e[key].append(value)
        return len(e["src"]) - 1

    def wait(
        self, task: int, kind: WaitKind, *, stream: int = -1, device: int = -1, record: int = -1
    ) -> None:
        w = self._waits
        for key, value in (
            ("task_idx", task),
            ("kind", int(kind)),
            ("target_processor_idx", stream),
            ("device", device),
            ("record_task_idx", record),
        ):
            w[key].append(value)

    def process_group(self, name: str, ranks: tuple[int, ...] = ()) -> int:
        self._pgs.append(ProcessGroup(name=name, ranks=ranks))
        return len(self._pgs) - 1

    def comm(
        self,
        kind: CommType,
        size_bytes: int = 0,
        pg: int = -1,
        seq_id: int = -1,
        peer_rank: int = -1,
        tag: int = -1,
        wait_ns: int = 0,
    ) -> int:
        c = self._comms
        for key, value in (
            ("kind", int(kind)),
            ("size_bytes", size_bytes),
            ("pg_idx", pg),
            ("seq_id", seq_id),
            ("peer_rank", peer_rank),
            ("tag", tag),
            ("wait_ns", wait_ns),
        ):
            c[key].append(value)
        return len(c["kind"]) - 1

    def annotate(
        self,
        name: str,
        processor: int,
        first: int,
        last: int,
        *,
        kind: AnnotationKind = AnnotationKind.STEP,
        ts_ns: int = 0,
        dur_ns: int = 0,
        lead_ns: int = 0,
        tail_ns: int = 0,
    ) -> None:
        a = self._ann
        for key, value in (
            ("name_idx", self._name(name)),
            ("kind", int(kind)),
            ("processor_idx", processor),
            ("first_task_idx", first),
            ("last_task_idx", last),
            ("ts_ns", ts_ns),
            ("dur_ns", dur_ns),
            ("lead_ns", lead_ns),
            ("tail_ns", tail_ns),
        ):
            a[key].append(value)

    def build(self) -> ExecGraph:
        def cols(d: dict[str, list[Any]], dtype: dict[str, type]) -> dict[str, Any]:
            return {k: np.array(v, dtype=dtype[k]) for k, v in d.items() if k in dtype}

        p = self._proc
        procs = Processors(**cols(p, Processors._COLUMNS), label=tuple(p["label"]))
        return ExecGraph(
            names=tuple(self._names),
            processors=procs,
            tasks=Tasks.create(**cols(self._tasks, Tasks._COLUMNS)),
            edges=Edges(**cols(self._edges, Edges._COLUMNS)),
            waits=Waits(**cols(self._waits, Waits._COLUMNS)),
            annotations=Annotations.create(**cols(self._ann, Annotations._COLUMNS)),
            comms=Comms(**cols(self._comms, Comms._COLUMNS)),
            process_groups=tuple(self._pgs),
            rank=self.rank,
            world_size=self.world_size,
        )


def random_graph(
    n_tasks: int,
    *,
    seed: int = 0,
    n_threads: int = 2,
    n_streams: int = 4,
    inter_stream_every: int = 50,
    sync_every: int = 1000,
) -> ExecGraph:
    """A valid synthetic graph of about ``n_tasks`` tasks (half CPU launches, half kernels).

    Threads issue launch calls round-robin; every launch starts a kernel on one of the streams
    its thread feeds (LAUNCH edge, delay 1 us); every ``inter_stream_every``-th kernel also
    depends on the thread's previous kernel when that ran on another stream (INTER_STREAM); every ``sync_every``-th launch call is
    followed by a stream synchronize wait on its stream. Deterministic for a seed.
    """
    rng = np.random.default_rng(seed)
    n_launch = max(n_tasks // 2, 1)
    n_tasks = 2 * n_launch
    n_proc = n_threads + n_streams
    kind_p = np.r_[np.zeros(n_threads), np.ones(n_streams)].astype(np.int8)
    procs = Processors.create(
        kind=kind_p,
        pid=np.zeros(n_proc, np.int64),
        tid=np.arange(n_proc, dtype=np.int64),
        device=np.r_[np.full(n_threads, -1), np.zeros(n_streams)].astype(np.int32),
    )
    li = np.arange(n_launch, dtype=np.int64)
    thread = (li % n_threads).astype(np.int32)
    # each stream is fed by one thread (stream % n_threads == thread), as in real traces; a
    # stream shared by threads running ahead of each other could legitimately deadlock a sync
    per = max(n_streams // n_threads, 1)
    stream_choice = thread + n_threads * rng.integers(0, per, n_launch)
    stream = (n_threads + stream_choice % n_streams).astype(np.int32)
    # rows: launches first (0..n_launch-1), kernels after (kernel i is launched by launch i)
    processor_idx = np.r_[thread, stream]
    kind = np.r_[np.full(n_launch, TaskKind.RUNTIME), np.full(n_launch, TaskKind.KERNEL)]
    dur = np.r_[rng.integers(2_000, 8_000, n_launch), rng.integers(1_000, 60_000, n_launch)]
    tasks = Tasks.create(
        name_idx=np.r_[np.zeros(n_launch), np.ones(n_launch)].astype(np.int32),
        kind=kind.astype(np.int8),
        processor_idx=processor_idx,
        dur_ns=dur.astype(np.int64),
    )
    # intra-processor chains, in row order per processor
    order = np.lexsort((np.arange(n_tasks), processor_idx))
    same = processor_idx[order][1:] == processor_idx[order][:-1]
    intra_src, intra_dst = order[:-1][same], order[1:][same]
    intra_kind = np.where(
        kind_p[processor_idx[intra_src]] == 0, DepKind.INTRA_THREAD, DepKind.INTRA_STREAM
    )
    intra_delay = np.where(
        intra_kind == DepKind.INTRA_THREAD, rng.integers(0, 3_000, len(intra_src)), 0
    )
    launch_src, launch_dst = li, li + n_launch
    # inter-stream: kernel i waits for the previous kernel of its thread on a different stream
    cand = li[(li % inter_stream_every == inter_stream_every - 1) & (li >= n_threads)]
    prev = cand - n_threads
    ok = stream[prev] != stream[cand]
    is_src, is_dst = prev[ok] + n_launch, cand[ok] + n_launch
    src = np.r_[intra_src, launch_src, is_src]
    dst = np.r_[intra_dst, launch_dst, is_dst]
    ekind = np.r_[
        intra_kind, np.full(n_launch, DepKind.LAUNCH), np.full(len(is_src), DepKind.INTER_STREAM)
    ]
    delay = np.r_[intra_delay, np.full(n_launch, 1_000), np.zeros(len(is_src), np.int64)]
    edges = Edges.create(
        src=src, dst=dst, kind=ekind.astype(np.int8), delay_ns=delay.astype(np.int64)
    )
    w_task = li[(li % sync_every == sync_every - 1)]
    waits = Waits.create(
        task_idx=w_task,
        kind=np.full(len(w_task), WaitKind.STREAM, np.int8),
        target_processor_idx=stream[w_task],
    )
    return ExecGraph(
        names=("cudaLaunchKernel", "kernel"),
        processors=procs,
        tasks=tasks,
        edges=edges,
        waits=waits,
    )
