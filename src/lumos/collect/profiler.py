"""The step hook a training script wraps its loop in: per-rank Kineto (+ ET) of the same steps.

Two lines in a training script::

    with lumos.collect.collector(parallel={"dp": world_size}) as col:
        for batch in data:
            train_step(batch)
            col.step()

With no configuration given and ``LUMOS_COLLECT_DIR`` unset, the collector is disabled and
:meth:`Collector.step` does nothing, so the script runs unchanged outside ``lumos collect``.
Enabled, it runs one ``torch.profiler`` session per rank with a schedule (``wait`` untraced,
``warmup`` discarded, ``steps`` recorded), ``record_shapes=True``, CUDA and CUDA sync events when
CUDA is present, and, with ``execution_trace``, a :class:`torch.profiler.ExecutionTraceObserver`
attached to the *same* session so its ``rf_id`` values join the Kineto "Record function id" of
the same iterations. Files land in the run directory under the names of
:mod:`lumos.collect.manifest`; each is written beside its final name and renamed when complete.
Enter the collector after ``torch.distributed.init_process_group`` so it sees rank and backend.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import shutil
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from lumos._io import atomic_write
from lumos.collect._torch import import_torch
from lumos.collect.config import CollectConfig
from lumos.collect.manifest import et_name, kineto_name, write_manifest, write_rank_record

__all__ = ["Collector", "collector"]


def collector(
    config: CollectConfig | None = None,
    *,
    parallel: Mapping[str, int] | None = None,
    barrier: bool = True,
) -> Collector:
    """A :class:`Collector` for ``config``, or for the environment when ``config`` is None.

    ``parallel`` records the job's parallel degrees (``dp``, ``pp``, ``tp``, ...) in the manifest.
    """
    cfg = config if config is not None else CollectConfig.from_env()
    return Collector(cfg, parallel=parallel, barrier=barrier)


class Collector:
    """A profiler session around a training loop; disabled (a no-op) when ``config`` is None.

    ``barrier``: after the session, ranks of an initialised process group meet in a barrier so
    rank 0 can write a manifest naming every rank's files; turn it off when the ranks do not
    all leave the loop together.
    """

    def __init__(
        self,
        config: CollectConfig | None,
        *,
        parallel: Mapping[str, int] | None = None,
        barrier: bool = True,
    ) -> None:
        self.config = config
        self.parallel = dict(parallel or {})
        self.barrier = barrier
        self.rank = 0
        self.world_size = 1
        self.steps_done = 0
        self.kineto_path: Path | None = None
        self.et_path: Path | None = None
        self._prof: Any = None
        self._et_tmp: Path | None = None
        self._facts: dict[str, Any] = {}

    @property
    def enabled(self) -> bool:
        """True when this collector records anything."""
        return self.config is not None

    @property
    def recorded_steps(self) -> int:
        """Active iterations recorded so far (at most ``config.steps``)."""
        if self.config is None:
            return 0
        done = self.steps_done - self.config.wait - self.config.warmup
        return max(0, min(done, self.config.steps))

    def __enter__(self) -> Collector:
        if self.config is None:
            return self
        torch = import_torch("collecting traces (lumos.collect)")
        cfg = self.config
        self._facts = _process_facts(torch)
        self.rank = int(self._facts["rank"])
        self.world_size = int(self._facts["world_size"])
        cfg.run_dir.mkdir(parents=True, exist_ok=True)
        self.kineto_path = cfg.run_dir / kineto_name(self.rank)

        from torch.profiler import ProfilerActivity, profile, schedule

        activities = [ProfilerActivity.CPU]
        experimental = None
        if self._facts["device_type"] == "cuda":
            activities.append(ProfilerActivity.CUDA)
            experimental = torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True)
        observer = None
        if cfg.execution_trace:
            from torch.profiler import ExecutionTraceObserver

            # The observer streams JSON as ops run; a dot-name keeps a crashed run's partial
            # file from looking like a finished trace until it is renamed on exit.
            self._et_tmp = cfg.run_dir / f".{et_name(self.rank)}.partial"
            observer = ExecutionTraceObserver().register_callback(str(self._et_tmp))
        self._prof = profile(
            activities=activities,
            schedule=schedule(wait=cfg.wait, warmup=cfg.warmup, active=cfg.steps, repeat=1),
            on_trace_ready=self._save_kineto,
            record_shapes=True,
            with_stack=cfg.with_stack,
            profile_memory=cfg.memory,
            experimental_config=experimental,
            execution_trace_observer=observer,
        )
        self._prof.__enter__()
        return self

    def step(self) -> None:
        """Mark the end of one training iteration (call once per iteration)."""
        self.steps_done += 1
        if self._prof is not None:
            self._prof.step()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._prof is None or self.config is None:
            return
        prof, self._prof = self._prof, None
        prof.__exit__(exc_type, exc, tb)
        cfg = self.config
        if self._et_tmp is not None and self._et_tmp.exists():
            if self.recorded_steps > 0:
                self.et_path = cfg.run_dir / et_name(self.rank)
                os.replace(self._et_tmp, self.et_path)
            else:
                self._et_tmp.unlink()
        self._write_record()
        if exc_type is not None:
            return
        if self.barrier and self.world_size > 1:
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized():
                dist.barrier()
        if self.rank == 0:
            write_manifest(cfg.run_dir)

    def _save_kineto(self, prof: Any) -> None:
        assert self.kineto_path is not None
        tmp = self.kineto_path.with_name(f".{self.kineto_path.name}.json.partial")
        try:
            prof.export_chrome_trace(str(tmp))
            with (
                open(tmp, "rb") as src,
                atomic_write(self.kineto_path, "wb") as raw,
                gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as gz,
            ):
                shutil.copyfileobj(src, gz, 1 << 20)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    def _write_record(self) -> None:
        assert self.config is not None
        cfg = self.config
        kineto = self.kineto_path if self.kineto_path and self.kineto_path.exists() else None
        record = dict(self._facts)
        record.update(
            parallel=self.parallel or {"dp": self.world_size},
            schedule={"wait": cfg.wait, "warmup": cfg.warmup, "active": cfg.steps},
            recorded_steps=self.recorded_steps,
            kineto=kineto.name if kineto else None,
            et=self.et_path.name if self.et_path else None,
            memory=cfg.memory,
            argv=list(sys.argv),
        )
        write_rank_record(cfg.run_dir, record)


def _process_facts(torch: Any) -> dict[str, Any]:
    """Rank, world, backend and device of this process, from torch.distributed or the env."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        rank, world_size = dist.get_rank(), dist.get_world_size()
        backend: str | None = str(dist.get_backend())
    else:
        rank = int(os.environ.get("RANK", "0"))
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
        backend = None
    if torch.cuda.is_available():
        device_type, device = "cuda", f"cuda:{torch.cuda.current_device()}"
    else:
        device_type, device = "cpu", "cpu"
    return {
        "rank": rank,
        "world_size": world_size,
        "local_rank": int(os.environ.get("LOCAL_RANK", rank)),
        "backend": backend,
        "device_type": device_type,
        "device": device,
        "cuda_sync_events": device_type == "cuda",
        "torch_version": str(torch.__version__),
        "intra_op_threads": int(torch.get_num_threads()),
        "host": socket.gethostname(),
        "pid": os.getpid(),
    }
