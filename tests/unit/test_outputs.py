"""Output paths (issue 13): checked before the work, OS errors as one line, sets written atomically.

The SIGTERM test runs the CLI in a child process (the signal goes to that process only) under
``subprocess.run(timeout=...)`` so that a hang fails instead of stalling the suite.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import lumos.replay
from lumos._io import atomic_outputs, atomic_write, check_writable
from lumos.cli.main import main
from lumos.errors import OutputError


def _trace(tmp_path: Path) -> Path:
    ev = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 100.0,
          "dur": 10.0, "args": {}}  # fmt: skip
    step = {**ev, "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 90.0, "dur": 100.0}
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": [step, ev]}))
    return p


def _error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("lumos: error: "), err
    return err[0]


def _listing(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


@pytest.mark.parametrize(
    "argv",
    [
        ["replay", "{t}", "-o", "{f}/out"],
        ["replay", "{t}", "-o", "{f}"],
        ["convert", "{t}", "-o", "{f}/prefix"],
        ["estimate", "{t}", "--set", "dp=2", "-o", "{f}/out"],
        ["report", "{t}", "-o", "{f}/r.html"],
        ["chakra", "jsonize", "{t}", "-o", "{f}/x.json"],
        ["chakra", "generate", "--collective", "all_reduce", "--num-npus", "2", "-o", "{f}"],
    ],
)
def test_output_at_or_under_a_file_is_refused_before_the_work(tmp_path, capsys, argv):
    t = _trace(tmp_path)
    f = tmp_path / "a_file"
    f.write_text("keep me")
    assert main([a.format(t=t, f=f) for a in argv]) == 1
    line = _error_line(capsys)
    assert f"cannot write {f}" in line
    assert f.read_text() == "keep me"


def test_check_writable_kinds(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    assert check_writable(d / "new" / "deeper", "dir") == d / "new" / "deeper"
    assert not (d / "new").exists()  # checking creates nothing
    with pytest.raises(OutputError, match="is a directory"):
        check_writable(d, "file")
    check_writable(d / "x", "prefix")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_directory_without_write_permission(tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        assert main(["replay", str(_trace(tmp_path)), "-o", str(ro / "out")]) == 1
        assert "no permission" in _error_line(capsys)
    finally:
        ro.chmod(0o755)


def test_disk_full_while_writing_is_one_line_and_leaves_nothing(tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    assert main(["replay", str(_trace(tmp_path)), "-o", str(out)]) == 1
    assert "No space left on device" in _error_line(capsys)
    assert list(out.iterdir()) == []


def test_atomic_write_turns_os_errors_into_output_errors(tmp_path):
    f = tmp_path / "f"
    f.write_text("")
    with pytest.raises(OutputError, match="cannot write"), atomic_write(f / "x.json") as out:
        out.write("never")


def test_interrupt_while_writing_keeps_the_previous_set(tmp_path, capsys, monkeypatch):
    t, out = _trace(tmp_path), tmp_path / "out"
    assert main(["replay", str(t), "-o", str(out)]) == 0
    before = _listing(out)
    assert set(before) == {"replay.json", "replay.perfetto.json", "sm_util.csv"}

    def interrupted(path, *args, **kwargs):
        Path(path).write_text("partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(lumos.replay, "write_chrome_trace", interrupted)
    assert main(["replay", str(t), "--scale", "mm=0.5", "-o", str(out)]) == 130
    assert _listing(out) == before  # no new replay.json beside the old perfetto, no temp files


def test_atomic_outputs_lands_main_last_and_cleans_up(tmp_path):
    out = tmp_path / "o"
    with atomic_outputs(out, "main.json") as tmp:
        (tmp / "main.json").write_text("m")
        (tmp / "side.json").write_text("s")
    assert _listing(out) == {"main.json": b"m", "side.json": b"s"}
    with pytest.raises(RuntimeError), atomic_outputs(out, "main.json") as tmp:
        (tmp / "main.json").write_text("new")
        raise RuntimeError
    assert _listing(out) == {"main.json": b"m", "side.json": b"s"}


def test_sigterm_while_writing_rolls_back_and_exits_143(tmp_path):
    t, out = _trace(tmp_path), tmp_path / "out"
    assert main(["replay", str(t), "-o", str(out)]) == 0
    before = _listing(out)
    code = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "import lumos.replay\n"
        "from lumos.cli.main import main\n"
        "def killed(path, *a, **k):\n"
        "    Path(path).write_text('partial')\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "lumos.replay.write_chrome_trace = killed\n"
        f"sys.exit(main(['replay', {str(t)!r}, '--scale', 'mm=0.5', '-o', {str(out)!r}]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert proc.returncode == 143, proc.stderr
    assert proc.stderr.strip().splitlines() == ["lumos: terminated"]
    assert _listing(out) == before
