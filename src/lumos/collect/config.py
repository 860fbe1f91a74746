"""What to record, and how that travels through the environment to every rank.

A :class:`CollectConfig` says where the run directory is, which iterations to record (skip
``wait`` + ``warmup`` steps, then record ``steps`` active ones) and whether to also record a
PyTorch Execution Trace. ``lumos collect -- <command>`` serialises it into ``LUMOS_COLLECT_*``
environment variables (:meth:`CollectConfig.to_env`); the training script's hook reads them back
(:meth:`CollectConfig.from_env`), so a script that calls the hook collects nothing unless asked.

======================  =========================================  =========
variable                meaning                                    default
======================  =========================================  =========
``LUMOS_COLLECT_DIR``   run directory; collection is on when set   (off)
``LUMOS_COLLECT_STEPS`` active (recorded) iterations                2
``LUMOS_COLLECT_WARMUP`` profiler warm-up iterations (not kept)     1
``LUMOS_COLLECT_WAIT``  iterations skipped before warm-up           1
``LUMOS_COLLECT_ET``    ``1`` records a PyTorch Execution Trace    0
``LUMOS_COLLECT_STACK`` ``1`` records Python stacks (slow)          0
``LUMOS_COLLECT_MEMORY`` ``1`` records allocations and frees       1
                        (``[memory]`` events, ``profile_memory``)
======================  =========================================  =========
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from lumos.errors import ConfigError

__all__ = ["ENV_PREFIX", "CollectConfig"]

ENV_PREFIX = "LUMOS_COLLECT_"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


@dataclass(frozen=True, kw_only=True)
class CollectConfig:
    """Which iterations of a training job to record, and where.

    ``wait`` iterations run untraced, then ``warmup`` iterations run with the profiler on but
    discarded (first-call costs, allocator growth), then ``steps`` iterations are recorded into
    one Kineto trace per rank (and one Execution Trace per rank with ``execution_trace``); with ``memory`` every allocation
    and free of the recorded steps is in the Kineto trace (``profile_memory=True``). The
    job must run at least :attr:`total_steps` iterations for the trace to be written.
    """

    run_dir: Path
    steps: int = 2
    warmup: int = 1
    wait: int = 1
    execution_trace: bool = False
    with_stack: bool = False
    memory: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "run_dir", Path(self.run_dir))
        if self.steps < 1:
            raise ConfigError(f"steps must be at least 1, got {self.steps}")
        if self.warmup < 0 or self.wait < 0:
            raise ConfigError(
                f"warmup and wait cannot be negative, got warmup={self.warmup} wait={self.wait}"
            )

    @property
    def total_steps(self) -> int:
        """Iterations the job must run for the recorded window to close."""
        return self.wait + self.warmup + self.steps

    def to_env(self) -> dict[str, str]:
        """The ``LUMOS_COLLECT_*`` variables that make :meth:`from_env` return this config."""
        return {
            f"{ENV_PREFIX}DIR": str(self.run_dir.resolve()),
            f"{ENV_PREFIX}STEPS": str(self.steps),
            f"{ENV_PREFIX}WARMUP": str(self.warmup),
            f"{ENV_PREFIX}WAIT": str(self.wait),
            f"{ENV_PREFIX}ET": "1" if self.execution_trace else "0",
            f"{ENV_PREFIX}STACK": "1" if self.with_stack else "0",
            f"{ENV_PREFIX}MEMORY": "1" if self.memory else "0",
        }

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> CollectConfig | None:
        """The config the environment asks for, or None when ``LUMOS_COLLECT_DIR`` is unset.

        A malformed value raises :class:`~lumos.errors.ConfigError` naming the variable: a job
        that was asked to collect must not silently run without collecting.
        """
        env = os.environ if environ is None else environ
        run_dir = env.get(f"{ENV_PREFIX}DIR", "").strip()
        if not run_dir:
            return None
        return cls(
            run_dir=Path(run_dir),
            steps=_int(env, "STEPS", 2),
            warmup=_int(env, "WARMUP", 1),
            wait=_int(env, "WAIT", 1),
            execution_trace=_bool(env, "ET", False),
            with_stack=_bool(env, "STACK", False),
            memory=_bool(env, "MEMORY", True),
        )


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(ENV_PREFIX + name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{ENV_PREFIX}{name}={raw!r} is not an integer") from None


def _bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(ENV_PREFIX + name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(f"{ENV_PREFIX}{name}={raw!r} is not a boolean (use 1 or 0)")
