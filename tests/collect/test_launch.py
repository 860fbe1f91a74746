"""run_collect: environment plumbing to the command, manifest writing, stale-file clearing."""

from __future__ import annotations

import json
import sys

import pytest

from lumos.collect import CollectConfig, run_collect, torchrun_command
from lumos.errors import ConfigError, NoTracesError

# A stand-in for a training job: reads the config from the environment like the hook does and
# writes one rank record plus an empty "trace" (no torch needed).
FAKE_JOB = """
import json, os, sys
from lumos.collect import CollectConfig, kineto_name
from lumos.collect.manifest import write_rank_record
cfg = CollectConfig.from_env()
assert cfg is not None, "LUMOS_COLLECT_DIR not passed"
rank = int(os.environ.get("RANK", "0"))
(cfg.run_dir / kineto_name(rank)).write_bytes(b"{}")
write_rank_record(cfg.run_dir, {"rank": rank, "world_size": 1, "kineto": kineto_name(rank),
    "et": None, "schedule": {"steps": cfg.steps, "et": cfg.execution_trace}})
sys.exit(int(os.environ.get("FAKE_EXIT", "0")))
"""


def test_env_reaches_the_command_and_manifest_is_written(tmp_path):
    cfg = CollectConfig(run_dir=tmp_path / "run", steps=5, execution_trace=True)
    cmd = [sys.executable, "-c", FAKE_JOB]
    res = run_collect(cfg, cmd)
    assert res.exit_code == 0 and res.manifest == (tmp_path / "run" / "run.json").resolve()
    data = json.loads(res.manifest.read_text())
    assert data["command"] == cmd and data["exit_code"] == 0 and data["complete"]
    assert data["schedule"] == {"steps": 5, "et": True}


def test_failing_command_keeps_its_exit_code(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_EXIT", "3")
    res = run_collect(CollectConfig(run_dir=tmp_path), [sys.executable, "-c", FAKE_JOB])
    assert res.exit_code == 3
    assert json.loads(res.manifest.read_text())["exit_code"] == 3
    res = run_collect(
        CollectConfig(run_dir=tmp_path), [sys.executable, "-c", "raise SystemExit(4)"]
    )
    assert res.exit_code == 4 and res.manifest is None


def test_command_that_never_calls_the_hook(tmp_path):
    with pytest.raises(NoTracesError, match="recorded nothing"):
        run_collect(CollectConfig(run_dir=tmp_path), [sys.executable, "-c", "pass"])


def test_previous_run_files_are_cleared_but_nothing_else(tmp_path):
    for name in ("run.json", "rank3.meta.json", "rank3.kineto.json.gz", "rank3.et.json",
                 ".rank3.et.json.partial", "notes.txt"):  # fmt: skip
        (tmp_path / name).write_text("old")
    run_collect(CollectConfig(run_dir=tmp_path), [sys.executable, "-c", FAKE_JOB])
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["notes.txt", "rank0.kineto.json.gz", "rank0.meta.json", "run.json"]


def test_bad_commands(tmp_path):
    with pytest.raises(ConfigError, match="no command"):
        run_collect(CollectConfig(run_dir=tmp_path), [])
    with pytest.raises(ConfigError, match="command not found: /no/such/binary"):
        run_collect(CollectConfig(run_dir=tmp_path), ["/no/such/binary"])


def test_torchrun_command_shape():
    cmd = torchrun_command("lumos.examples.gpt", ["--mode", "ddp"], nproc=2, master_port=29999)
    assert cmd[1:3] == ["-m", "torch.distributed.run"]
    assert cmd[cmd.index("--nproc-per-node") + 1] == "2"
    assert cmd[cmd.index("--master-port") + 1] == "29999"
    assert cmd[-4:] == ["-m", "lumos.examples.gpt", "--mode", "ddp"]
    port = int(torchrun_command("m")[torchrun_command("m").index("--master-port") + 1])
    assert 0 < port < 65536
    with pytest.raises(ConfigError):
        torchrun_command("m", nproc=0)


def test_cli_collect_runs_the_command_after_double_dash(tmp_path, capsys):
    pytest.importorskip("torch")  # the verb refuses to run without torch installed
    from lumos.cli.main import main

    run = tmp_path / "run"
    argv = ["collect", "-o", str(run), "--steps", "3", "--et", "--", sys.executable, "-c", FAKE_JOB]
    assert main(argv) == 0
    assert "run.json" in capsys.readouterr().out
    data = json.loads((run / "run.json").read_text())
    assert data["command"] == [sys.executable, "-c", FAKE_JOB]
    assert data["schedule"] == {"steps": 3, "et": True}
    assert main(["collect", "-o", str(run)]) == 1
    assert "no command to run" in capsys.readouterr().err
