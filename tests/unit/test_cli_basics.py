"""The CLI's contract: --version, --help, python -m lumos, one-line errors."""

from __future__ import annotations

import subprocess
import sys

from lumos import __version__
from lumos.cli.main import main


def test_version_flag(capsys):
    try:
        main(["--version"])
    except SystemExit as exc:
        assert exc.code == 0
    assert __version__ in capsys.readouterr().out


def test_help_lists_usage(capsys):
    assert main([]) == 0
    assert "usage: lumos" in capsys.readouterr().out


def test_python_dash_m_runs():
    out = subprocess.run(
        [sys.executable, "-m", "lumos", "--help"], capture_output=True, text=True, check=True
    )
    assert "lumos" in out.stdout
