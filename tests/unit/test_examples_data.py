"""The bundled example is lumos's own recording: small, complete, and every command takes it."""

from __future__ import annotations

import json

from lumos.cli.main import main
from lumos.collect import read_manifest
from lumos.examples_data import example_run_dir, example_trace_path
from lumos.replay import build_workload, replay

EXPECTED_FILES = {"README.md", "run.json", "rank0.kineto.json.gz", "rank1.kineto.json.gz"}


def test_the_folder_is_a_small_run_lumos_collected():
    d = example_run_dir()
    assert {p.name for p in d.iterdir()} == EXPECTED_FILES
    assert sum(p.stat().st_size for p in d.iterdir()) < 512 * 1024  # well under 1 MB
    doc = json.loads((d / "run.json").read_text())
    assert doc["format"] == "lumos.run"  # written by lumos collect
    assert doc["command"][doc["command"].index("-m") + 1] == "lumos.examples.gpt"
    m = read_manifest(d)
    assert m.complete and m.world_size == 2 and m.data["backend"] == "gloo"
    assert [r.kineto for r in m.ranks] == [example_trace_path(), d / "rank1.kineto.json.gz"]
    readme = (d / "README.md").read_text()
    assert "lumos collect" in readme and "## Regenerate" in readme


def test_both_ranks_replay_together_like_their_measurement():
    w, _ = build_workload([example_run_dir()], workers=1)
    assert w.ranks == (0, 1)
    assert (w.collective_groups().sizes() == 2).all()  # every all-reduce matched across ranks
    rep = replay(w)
    errors = [abs(st["error"]) for s in rep.summaries for st in s["steps"]]
    assert len(errors) == 6 and max(errors) < 0.01


def test_replay_and_convert_commands_take_it(tmp_path, capsys):
    assert main(["replay", str(example_run_dir()), "-o", str(tmp_path / "r")]) == 0
    doc = json.loads((tmp_path / "r" / "replay.json").read_text())
    assert len(doc["steps"]) == 3
    assert (
        main(["convert", str(example_run_dir()), "-o", str(tmp_path / "c"), "--workers", "1"]) == 0
    )
    assert sorted(p.name for p in tmp_path.glob("c.*.et")) == ["c.0.et", "c.1.et"]
    assert main(["chakra", "validate", str(tmp_path / "c.0.et")]) == 0
    assert "ProfilerStep#" in capsys.readouterr().out
