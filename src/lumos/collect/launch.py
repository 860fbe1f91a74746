"""Running a job with collection switched on through the environment (``lumos collect``).

:func:`run_collect` clears the run directory of a previous run's lumos files, runs the command
with ``LUMOS_COLLECT_*`` set (see :mod:`lumos.collect.config`), and merges the rank records into
``run.json``, adding the command line and its exit status. :func:`torchrun_command` builds the
``python -m torch.distributed.run`` line the demo uses, on a free local port.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from lumos.collect.config import CollectConfig
from lumos.collect.manifest import MANIFEST_NAME, write_manifest
from lumos.errors import ConfigError, NoTracesError

__all__ = ["CollectResult", "free_port", "run_collect", "torchrun_command"]

# Files a previous collection may have left; only these are removed before a new run.
_OURS = re.compile(r"^\.?rank\d+\.(kineto\.json\.gz|et\.json|meta\.json)(\..*partial)?$")


@dataclass(frozen=True, kw_only=True)
class CollectResult:
    """How a collection run ended: the command's exit status and the manifest (if any)."""

    exit_code: int
    manifest: Path | None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (for a rendezvous)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def torchrun_command(
    module: str,
    args: Sequence[str] = (),
    *,
    nproc: int = 2,
    master_port: int | None = None,
    python: str | None = None,
) -> list[str]:
    """``python -m torch.distributed.run`` running ``python -m module args`` on ``nproc`` ranks."""
    if nproc < 1:
        raise ConfigError(f"nproc must be at least 1, got {nproc}")
    port = free_port() if master_port is None else master_port
    return [
        python or sys.executable, "-m", "torch.distributed.run",
        "--nnodes", "1", "--nproc-per-node", str(nproc),
        "--master-addr", "127.0.0.1", "--master-port", str(port),
        "-m", module, *args,
    ]  # fmt: skip


def clear_run_dir(run_dir: Path) -> None:
    """Remove the files a previous lumos collection left in ``run_dir`` (and nothing else)."""
    if not run_dir.is_dir():
        return
    for p in sorted(run_dir.iterdir()):
        if p.is_file() and (p.name == MANIFEST_NAME or _OURS.match(p.name)):
            p.unlink()


def run_collect(
    config: CollectConfig,
    command: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    log: Path | None = None,
    timeout_s: float | None = None,
) -> CollectResult:
    """Run ``command`` with collection configured by ``config``; write the run's manifest.

    ``env`` defaults to this process's environment; ``log`` sends the command's stdout and
    stderr to a file instead of this terminal. A command that exits 0 but leaves no rank record
    (it never entered the hook) raises :class:`~lumos.errors.NoTracesError`.
    """
    if not command:
        raise ConfigError(
            "no command to run: put it after '--', e.g. lumos collect -o run -- torchrun ..."
        )
    run_dir = config.run_dir.resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    clear_run_dir(run_dir)
    full_env = dict(os.environ if env is None else env)
    full_env.update(config.to_env())
    try:
        if log is None:
            proc = subprocess.run(list(command), env=full_env, timeout=timeout_s, check=False)
        else:
            log.parent.mkdir(parents=True, exist_ok=True)
            with open(log, "wb") as out:
                proc = subprocess.run(
                    list(command), env=full_env, stdout=out, stderr=subprocess.STDOUT,
                    timeout=timeout_s, check=False,
                )  # fmt: skip
    except FileNotFoundError:
        raise ConfigError(f"command not found: {command[0]}") from None
    except subprocess.TimeoutExpired:
        raise ConfigError(
            f"command did not finish within {timeout_s:.0f} s: {' '.join(command)}"
        ) from None
    try:
        manifest = write_manifest(run_dir, command=list(command), exit_code=proc.returncode)
    except NoTracesError:
        if proc.returncode != 0:
            return CollectResult(exit_code=proc.returncode, manifest=None)
        raise NoTracesError(
            run_dir,
            "the command finished but recorded nothing: does the script wrap its loop in "
            "lumos.collect.collector() and call step() each iteration?",
        ) from None
    return CollectResult(exit_code=proc.returncode, manifest=manifest)
