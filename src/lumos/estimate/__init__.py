"""What-if estimation: a scenario (``--set KEY=VALUE``) edits the graphs and picks the cost model,
the simulation answers, and a table compares every scenario with the baseline.
:func:`check_invariants` checks what any job's layers and what-ifs must satisfy.

>>> from lumos.estimate import parse_scenario
>>> parse_scenario(["straggler=3:1.5"]).label
'straggler=3:1.5'
"""

from lumos.estimate.invariants import Check, check_invariants
from lumos.estimate.run import Estimate, EstimateRow, estimate, write_estimate
from lumos.estimate.scenario import Scenario, parse_scenario, parse_sweep

__all__ = [
    "Check",
    "Estimate",
    "EstimateRow",
    "Scenario",
    "check_invariants",
    "estimate",
    "parse_scenario",
    "parse_sweep",
    "write_estimate",
]
