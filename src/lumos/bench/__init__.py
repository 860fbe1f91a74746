"""Benchmarks from traces: a PyTorch or Chakra ET executed on this machine (``lumos bench``).

The flow, one module per stage (torch is imported only where ops run)::

    source   (source.py)      run directory, ETs, PREFIX   -> BenchSource: ranks, timing
    plan     (et_plan.py,     one rank's trace             -> RankPlan: steps of OpCall /
              chakra_plan.py)                                  CommCall / WorkCall (plan.py)
    execute  (worker.py,      one process per rank: torch ops, torch.distributed
              execute.py,     collectives, under the profiler -> rank<r>/ Kineto traces
              ops.py, comms.py, tensors.py; commbench.py for --comms-only)
    report   (compare.py,     executed traces vs source    -> bench.json
              report.py)

:func:`run_bench` does it all; ``lumos bench`` is its CLI.

>>> from lumos.bench import op_class
>>> op_class("aten::addmm"), op_class("aten::add_"), op_class("gloo:all_reduce")
('gemm', 'elementwise', 'communication')
"""

from lumos.bench.classes import OP_CLASSES, op_class
from lumos.bench.plan import CommCall, OpCall, RankPlan, Step, TensorSpec, WorkCall
from lumos.bench.report import BENCH_FILE, read_document
from lumos.bench.run import BenchOptions, run_bench
from lumos.bench.source import BenchSource, resolve_source

__all__ = [
    "BENCH_FILE",
    "OP_CLASSES",
    "BenchOptions",
    "BenchSource",
    "CommCall",
    "OpCall",
    "RankPlan",
    "Step",
    "TensorSpec",
    "WorkCall",
    "op_class",
    "read_document",
    "resolve_source",
    "run_bench",
]
