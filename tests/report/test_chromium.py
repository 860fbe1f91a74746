"""The report in a real browser: headless Chromium renders every chart with no script error.

Needs Debian's ``chromium`` (``apt-get install chromium``); skipped with a reason without it.
The screenshot is saved under ``$LUMOS_TEST_ARTIFACTS`` (default ``out/artifacts`` in the
checkout, which git ignores) for a human to look at.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from lumos.report.html import read_replay, write_report

FIXTURE = Path(__file__).parent / "data" / "replay.json"
CHROMIUM = os.environ.get("LUMOS_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"

pytestmark = [
    pytest.mark.chromium,
    pytest.mark.skipif(not Path(CHROMIUM).is_file(), reason=f"no headless Chromium at {CHROMIUM}"),
]


def _chromium(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    cmd = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
        "--hide-scrollbars", "--enable-logging=stderr", "--v=0",
        f"--user-data-dir={home / 'profile'}", *args,
    ]  # fmt: skip
    env = dict(os.environ, HOME=str(home))
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, check=False)


def test_report_renders_in_chromium(tmp_path):
    report = write_report(read_replay(FIXTURE), tmp_path / "report.html")
    url = report.resolve().as_uri()
    dom = _chromium("--dump-dom", url, home=tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    body = re.search(r"<body[^>]*>", dom.stdout)
    assert body is not None
    # The page's own script counts the charts once the DOM is ready and records any error.
    assert 'data-charts="4"' in body.group(0)
    assert "data-js-errors" not in body.group(0)
    console_errors = [
        ln for ln in dom.stderr.splitlines()
        if "CONSOLE" in ln and ("Uncaught" in ln or "Error" in ln)
    ]  # fmt: skip
    assert not console_errors, console_errors

    artifacts = Path(
        os.environ.get("LUMOS_TEST_ARTIFACTS", Path(__file__).parents[2] / "out" / "artifacts")
    )
    artifacts.mkdir(parents=True, exist_ok=True)
    shot = artifacts / "report.png"
    res = _chromium("--window-size=1000,2400", f"--screenshot={shot}", url, home=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


def test_fidelity_page_renders_in_chromium(tmp_path):
    """``lumos synth report``'s page: its one chart (the class mix) and no script error."""
    from lumos.graph.model import Workload
    from lumos.graph.synthetic import GraphBuilder
    from lumos.synth.fidelity import compare
    from lumos.synth.fidelity_report import write_fidelity

    b = GraphBuilder()
    st = b.stream(7)
    k = b.task(st, "sgemm", 100)
    b.annotate("ProfilerStep#1", st, k, k, dur_ns=100)
    w = Workload((b.build(),))
    page = write_fidelity(compare(w, w), tmp_path / "fid")["html"]
    dom = _chromium("--dump-dom", page.resolve().as_uri(), home=tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    body = re.search(r"<body[^>]*>", dom.stdout)
    assert body is not None
    assert 'data-charts="1"' in body.group(0)
    assert "data-js-errors" not in body.group(0)
