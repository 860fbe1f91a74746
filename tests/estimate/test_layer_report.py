"""``format_layers``: the text ``lumos layers`` prints, from a hand-written summary."""

from __future__ import annotations

from lumos.estimate.layer_report import format_layers


def test_format_layers_prints_the_summary_in_milliseconds():
    """One rank, 3 steps of 2.5 ms: 2 forward layers of 5 ops, 0.25 ms each (0.5 ms a step),
    4 optimizer blocks of 3 ops (0.12 ms a step) and 1.25 ms outside the layers; ``hidden``
    not found. Every ns figure is printed divided by 10^6, to 3 decimals."""
    doc = {
        "baseline": {
            "layers": {"value": 2, "how": "repeated blocks"},
            "hidden": {"value": -1, "how": ""},
        },
        "ranks": [
            {
                "rank": 0,
                "layers": 2,
                "reason": None,
                "microbatches": 1,
                "steps": 3,
                "step_ns": 2_500_000,
                "how": "module annotations",
                "phases": {
                    "forward": {
                        "layers": 2,
                        "ops_per_layer": 5,
                        "layer_ns": 250_000,
                        "total_ns": 500_000,
                    }
                },
                "repeats": [
                    {"phase": "optimizer", "blocks": 4, "ops_per_block": 3, "total_ns": 120_000}
                ],
                "outside_ns": 1_250_000,
            }
        ],
    }
    assert format_layers(doc).split("\n") == [
        "baseline configuration found in the trace:",
        "  layers          2         repeated blocks",
        "  hidden          not found ",
        "",
        "rank 0: 2 layers, 1 micro-batch(es), 3 step(s) of 2.500 ms (module annotations)",
        "  phase       layers  ops/layer  ms/layer   ms/step",
        "  forward          2          5     0.250     0.500",
        "  other repeats (not layers): optimizer 4 x 3 ops (0.120 ms/step)",
        "  outside the layers: 1.250 ms per step "
        "(embedding, head, loss, data, collectives between layers)",
    ]
