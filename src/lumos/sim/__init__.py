"""Replay simulation of execution graphs: :func:`simulate`, :class:`SimResult`, cost models."""

from lumos.sim.cost import CostModel, TracedCost
from lumos.sim.engine import simulate
from lumos.sim.result import SimResult

__all__ = ["CostModel", "SimResult", "TracedCost", "simulate"]
