"""Collecting traces from a real PyTorch job (torch imported lazily; lumos installs without it).

* :func:`collector` / :class:`Collector`: the step hook a training script wraps its loop in.
* :class:`CollectConfig`: which steps to record and where; travels to ranks as ``LUMOS_COLLECT_*``.
* :func:`run_collect`: run a command (``torchrun ...``) with collection enabled, then write the
  manifest; what ``lumos collect -- <command>`` does.
* :func:`read_manifest` / :class:`RunManifest`: a collected run directory's ``run.json``.
"""

from lumos.collect.config import CollectConfig
from lumos.collect.launch import free_port, run_collect, torchrun_command
from lumos.collect.manifest import (
    RankFiles,
    RunManifest,
    et_name,
    kineto_name,
    read_manifest,
    write_manifest,
)
from lumos.collect.profiler import Collector, collector

__all__ = [
    "CollectConfig",
    "Collector",
    "RankFiles",
    "RunManifest",
    "collector",
    "et_name",
    "free_port",
    "kineto_name",
    "read_manifest",
    "run_collect",
    "torchrun_command",
    "write_manifest",
]
