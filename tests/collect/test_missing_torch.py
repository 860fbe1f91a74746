"""Without torch: lumos imports, collect/demo fail in one line saying how to install it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lumos.cli.main import main
from lumos.collect import CollectConfig, Collector, collector
from lumos.errors import MissingDependencyError

INSTALL_HINT = "pip install 'lumos[torch]'"


@pytest.fixture
def no_torch(monkeypatch):
    """Make ``import torch`` fail in this process, as on an install without the extra."""
    for name in list(sys.modules):
        if name == "torch" or name.startswith("torch."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "torch", None)


@pytest.mark.parametrize(
    "argv", [["collect", "-o", "RUN", "--", "true"], ["demo", "-o", "RUN"]], ids=["collect", "demo"]
)
def test_cli_verbs_fail_in_one_line(no_torch, tmp_path, capsys, argv):
    argv = [str(tmp_path / a) if a == "RUN" else a for a in argv]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("lumos: error:") and "needs torch" in err and INSTALL_HINT in err
    assert not (tmp_path / "RUN").exists()


def test_enabled_collector_raises_missing_dependency(no_torch, tmp_path):
    col = Collector(CollectConfig(run_dir=tmp_path))
    with pytest.raises(MissingDependencyError, match=r"pip install 'lumos\[torch\]'"):
        col.__enter__()


def test_disabled_collector_is_a_no_op_without_torch(no_torch, monkeypatch):
    monkeypatch.delenv("LUMOS_COLLECT_DIR", raising=False)
    with collector() as col:
        for _ in range(3):
            col.step()
    assert not col.enabled and col.steps_done == 3 and col.recorded_steps == 0


def test_report_works_without_torch(no_torch, tmp_path, capsys):
    from pathlib import Path

    fixture = Path(__file__).parents[1] / "report" / "data" / "replay.json"
    assert main(["report", str(fixture), "-o", str(tmp_path / "r.html")]) == 0
    assert (tmp_path / "r.html").stat().st_size > 1000


def test_importing_lumos_does_not_import_torch():
    code = (
        "import sys, lumos, lumos.collect, lumos.examples, lumos.report.html, lumos.cli.main\n"
        "lumos.cli.main.build_parser()\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
