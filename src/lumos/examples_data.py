"""The example lumos ships: a recording lumos made itself, so commands have a default that works
offline and without torch.

``data/examples/gpt_ddp_2rank_gloo/`` is a run directory written by ``lumos collect``: the bundled
GPT workload (:mod:`lumos.examples.gpt`, DDP) on 2 CPU ranks with gloo, 3 recorded steps, one
Kineto trace per rank and the ``run.json`` manifest. Its ``README.md`` says how to regenerate it.
No third-party trace is bundled.

>>> example_trace_path().name
'rank0.kineto.json.gz'
>>> sorted(p.name for p in example_run_dir().glob("*.kineto.json.gz"))
['rank0.kineto.json.gz', 'rank1.kineto.json.gz']
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

__all__ = ["EXAMPLE_RUN", "example_run_dir", "example_trace_path"]

#: The bundled run's folder name under ``lumos/data/examples``.
EXAMPLE_RUN = "gpt_ddp_2rank_gloo"


def example_run_dir() -> Path:
    """The bundled run directory (``run.json`` + both ranks' Kineto traces), inside the package."""
    return Path(str(files("lumos").joinpath("data", "examples", EXAMPLE_RUN)))


def example_trace_path() -> Path:
    """Rank 0's Kineto trace of the bundled run: lumos's GPT workload, DDP on 2 CPU ranks (gloo)."""
    return example_run_dir() / "rank0.kineto.json.gz"
