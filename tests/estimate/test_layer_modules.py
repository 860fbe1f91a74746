"""Layers from module annotations (``nn.Module: <Class>_<n>`` spans of traces recorded with their
Python stack), checked against counts read straight from the raw JSON."""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter

import numpy as np
from tests.realdata import trace

from lumos.estimate.baseline import detect_baseline
from lumos.estimate.layers import find_layers
from lumos.replay import build_workload


def _module_calls(path) -> Counter:
    """``class -> {instance: calls}`` of the raw trace's ``nn.Module:`` events."""
    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    calls: Counter = Counter()
    for e in events:
        name = e.get("name", "")
        if e.get("ph") == "X" and name.startswith("nn.Module: "):
            calls[name[len("nn.Module: ") :]] += 1
    return calls


def test_a_gpt_oss_forward_has_its_36_transformer_blocks():
    path = trace("allgather_b200")
    calls = _module_calls(path)
    # read from the JSON: TransformerBlock_0 .. _35, one call each (one forward pass)
    blocks = {k: v for k, v in calls.items() if re.fullmatch(r"TransformerBlock_\d+", k)}
    assert len(blocks) == 36 and set(blocks.values()) == {1}
    workload, _ = build_workload([str(path)])
    lm = find_layers(workload.graphs[0])
    assert lm.how == "module annotations (nn.Module: TransformerBlock)"
    assert lm.num_layers == 36
    (fwd,) = [x for x in lm.layer_groups() if x.phase == "forward"]
    assert fwd.count == 36
    # consecutive blocks, in time order, none sharing a task
    flat = np.concatenate(fwd.blocks)
    assert len(np.unique(flat)) == len(flat)
    t = workload.graphs[0].tasks
    assert (np.diff([t.ts_ns[b[0]] for b in fwd.blocks]) > 0).all()
    base = detect_baseline(workload)
    assert base.values["layers"] == 36
    assert "TransformerBlock" in base.how["layers"]


def test_activation_checkpointing_recomputes_are_not_forward_layers():
    path = trace("rccl_mi300")
    calls = _module_calls(path)
    # ResNet-18: BasicBlock_0 .. _7, each called 6 times in 3 steps: the forward and the
    # recompute activation checkpointing runs inside the backward
    blocks = {k: v for k, v in calls.items() if re.fullmatch(r"BasicBlock_\d+", k)}
    assert len(blocks) == 8 and set(blocks.values()) == {6}
    workload, _ = build_workload([str(path)])
    lm = find_layers(workload.graphs[0])
    assert lm.how == "module annotations (nn.Module: BasicBlock)"
    fwd = [x for x in lm.layer_groups() if x.phase == "forward"]
    assert sorted((x.step, x.count) for x in fwd) == [(0, 8), (1, 8), (2, 8)]
    assert lm.num_layers == 8


def test_without_module_spans_the_repeat_search_is_unchanged():
    # the bundled workload records no Python stack: layers come from the repeats, as before
    from pathlib import Path

    run = Path(__file__).parents[1] / "data" / "whatif_pairs" / "ddp_layers_x2"
    workload, _ = build_workload([str(run)])
    lm = find_layers(workload.graphs[0])
    assert lm.how == "repeated op sequence (names and Input Dims)"
    assert lm.num_layers == 4
