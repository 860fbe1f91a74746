"""``lumos comm``: the ASTRA-sim reference through --json, text output, one-line errors."""

from __future__ import annotations

import json

from lumos.cli.main import main

REFERENCE = ["comm", "all_reduce", "--size", "1MiB", "--ranks", "8", "--bandwidth", "50GB/s",
             "--latency", "500ns", "--chunks", "4", "--endpoint-delay", "10ns",
             "--local-mem-bw", "50GB/s"]  # fmt: skip


def test_astra_reference_json(capsys):
    assert main([*REFERENCE, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert isinstance(doc["time_ns"], int)
    assert abs(doc["time_ns"] - 117_780) <= 0.01 * 117_780
    assert doc["time_ns"] == sum(doc["terms"].values()) and doc["mode"] == "astra-sim"


def test_alpha_beta_text_and_topology(capsys):
    assert main(["comm", "all_reduce", "--size", "1MiB", "--ranks", "8", "--bandwidth",
                 "50GB/s", "--latency", "500ns", "--algorithm", "ring"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "43,700 ns" in out and "bandwidth_ns" in out
    assert main(["comm", "all_gather", "--size", "64MiB", "--ranks", "16", "--topology",
                 "dgx-h100", "--json"]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["time_ns"] > 0


def test_errors_are_one_line(capsys):
    for argv in (["comm", "all_reduce", "--size", "1XB", "--ranks", "8", "--bandwidth", "1GB/s"],
                 ["comm", "all_reduce", "--size", "1MiB", "--ranks", "8"],
                 ["comm", "all_reduce", "--size", "1MiB", "--ranks", "8", "--topology", "nope"],
                 ["comm"]):  # fmt: skip
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert err.startswith("lumos: error: ") and err.count("\n") == 1
