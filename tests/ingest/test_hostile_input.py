"""Hostile input (issue 13): bombs, huge numbers, deep nesting, odd archives and odd files.

Each input is built by the test. A call that could hang (a bomb, a pipe, a device, a big
archive) runs in a child process under ``subprocess.run(timeout=...)``: pytest-timeout is not
installed, and a hang must fail the suite instead of stalling it. The timeouts only catch hangs;
speed and memory are measured in benchmarks, not asserted here (peak memory of the bomb test is
checked through the child's own peak RSS, ``VmHWM``, which does not depend on the machine's
speed or on the size of the pytest process that started it).
"""

from __future__ import annotations

import io
import json
import os
import pickle
import subprocess
import sys
import tarfile
import zlib
from pathlib import Path

import pytest

from lumos._io import MAX_RATIO_ENV, read_bytes
from lumos.errors import ConfigError, InputError, LumosError, TraceFormatError
from lumos.graph.build import build_graph
from lumos.ingest.detect import expand_paths
from lumos.ingest.kineto import read_kineto, trace_from_bytes
from lumos.ingest.pytorch_et import read_pytorch_et

HANG_GUARD_S = 120
BIG = 2**70


def _run_child(code: str, *, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        env={**os.environ, **(env or {})},
    )


def _cli(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    code = f"import sys; from lumos.cli.main import main; sys.exit(main({list(argv)!r}))"
    return _run_child(code, env=env)


def _one_error_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lumos: error: "), proc.stderr
    return lines[0]


def _ev(**kw) -> dict:
    e = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 100.0,
         "dur": 10.0, "args": {}}  # fmt: skip
    e.update(kw)
    return e


def _trace(*extra: dict, **top) -> dict:
    kernel = _ev(cat="kernel", name="k", pid=0, tid=7, ts=105.0, dur=3.0,
                 args={"device": 0, "stream": 7, "correlation": 5})  # fmt: skip
    launch = _ev(cat="cuda_runtime", name="cudaLaunchKernel", ts=102.0, dur=2.0,
                 args={"correlation": 5})  # fmt: skip
    step = _ev(cat="user_annotation", name="ProfilerStep#1", ts=90.0, dur=100.0)
    return {"traceEvents": [step, _ev(), launch, kernel, *extra], **top}


def _write(tmp_path: Path, doc: dict | bytes | str, name: str = "t.json") -> Path:
    p = tmp_path / name
    if isinstance(doc, dict):
        doc = json.dumps(doc)
    p.write_bytes(doc.encode() if isinstance(doc, str) else doc)
    return p


# -- 1. decompression bombs ----------------------------------------------------------------------


def _write_bomb(path: Path, gib: int) -> None:
    """A gzip'd Kineto head followed by ``gib`` GiB of spaces, written chunk by chunk (the
    decompressed content never exists in memory)."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b" " * (1 << 20)
    with path.open("wb") as f:
        f.write(c.compress(b'{"traceEvents": ['))
        for _ in range(gib * 1024):
            f.write(c.compress(block))
        f.write(c.compress(b"]}") + c.flush())


def test_gzip_bomb_is_refused_with_bounded_memory(tmp_path):
    bomb = tmp_path / "bomb.json.gz"
    _write_bomb(bomb, 6)
    # The child's own peak: VmHWM belongs to the address space execve made (ru_maxrss does not
    # restart at exec, so a child of a pytest process grown to 1 GB would report its parent's).
    code = (
        "import resource, sys\n"
        "from lumos.cli.main import main\n"
        f"rc = main(['info', {str(bomb)!r}])\n"
        "try:\n"
        "    hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')]\n"
        "    kb = int(hwm[0].split()[1])\n"
        "except (OSError, IndexError):\n"
        "    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "print('maxrss_kb', kb)\n"
        "sys.exit(rc)\n"
    )
    proc = _run_child(code)
    line = _one_error_line(proc)
    assert str(bomb) in line and "decompression bomb" in line and MAX_RATIO_ENV in line
    maxrss_kb = int(proc.stdout.split()[-1])
    assert maxrss_kb < 1_000_000  # under 1 GB (the payload is 6 GiB)


def test_bomb_inside_a_tar_archive_is_refused(tmp_path):
    zeros = io.BytesIO(bytes(64 << 20))
    p = tmp_path / "ranks.tar.gz"
    with tarfile.open(p, "w:gz") as tar:
        info = tarfile.TarInfo("rank0.json")
        info.size = len(zeros.getbuffer())
        tar.addfile(info, zeros)
    with pytest.raises(InputError, match="decompression bomb"):
        read_bytes(p, "rank0.json")
    line = _one_error_line(_cli("info", str(p)))
    assert "decompression bomb" in line


def test_ratio_limit_is_an_environment_setting(tmp_path, monkeypatch):
    p = tmp_path / "zeros.json.gz"
    payload = b'{"traceEvents": [' + b" " * (20 << 20) + b"]}"
    p.write_bytes(zlib.compress(payload, 9, wbits=31))
    with pytest.raises(InputError, match="decompression bomb"):
        read_bytes(p)
    monkeypatch.setenv(MAX_RATIO_ENV, "100000")
    assert read_bytes(p) == payload
    monkeypatch.setenv(MAX_RATIO_ENV, "lots")
    with pytest.raises(ConfigError, match=MAX_RATIO_ENV):
        read_bytes(p)


def test_concatenated_gzip_members_read_as_one(tmp_path):
    p = tmp_path / "t.json.gz"
    doc = json.dumps(_trace()).encode()
    half = len(doc) // 2
    p.write_bytes(zlib.compress(doc[:half], wbits=31) + zlib.compress(doc[half:], wbits=31))
    assert read_bytes(p) == doc
    assert read_kineto(p).events.ts_ns.size == 4


# -- 2. huge numbers and deep nesting ------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "diagnostic"),
    [
        (_ev(pid=BIG), "pid_out_of_range_kept_as_label"),
        (_ev(tid=BIG), "tid_out_of_range_kept_as_label"),
        (_ev(args={"correlation": BIG}), "arg_correlation_out_of_range_dropped"),
        (_ev(cat="kernel", args={"stream": BIG, "device": 0}), "arg_stream_out_of_range_dropped"),
        (_ev(cat="kernel", args={"stream": 7, "device": 2**40}), "arg_device_out_of_range_dropped"),
    ],
)
def test_huge_integers_are_counted_not_crashes(tmp_path, extra, diagnostic):
    t = read_kineto(_write(tmp_path, _trace(extra)))
    assert t.diagnostics.get(diagnostic) == 1
    build_graph(t)


def test_step_number_beyond_64_bits_is_a_step_with_its_number_unknown(tmp_path):
    """A step's span is a step whatever its number; a number beyond int64 is unknown (-1),
    counted, and ``lumos info`` says so instead of "no ProfilerStep spans"."""
    big = "ProfilerStep#" + "9" * 30
    p = _write(tmp_path, _trace(_ev(name=big, ts=200.0, dur=50.0)))
    t = read_kineto(p)
    assert list(t.steps.name) == ["ProfilerStep#1", big]
    assert t.steps.step_num.tolist() == [1, -1]
    assert t.diagnostics["step_number_out_of_range"] == 1
    build_graph(t)
    out = _cli("info", str(p)).stdout
    assert "1 ProfilerStep number(s) beyond 64 bits" in out
    assert "no ProfilerStep spans" not in out


def test_huge_rank_is_treated_as_unknown_or_refused(tmp_path):
    p = _write(tmp_path, _trace(distributedInfo={"rank": BIG}))
    assert read_kineto(p).meta.rank == -1
    line = _one_error_line(_cli("convert", str(p), "-o", str(tmp_path / "out" / "x")))
    assert str(p) in line and "distributedInfo.rank" in line and "out of range" in line


@pytest.mark.parametrize("dur", [1e300, float(BIG)])
def test_absurd_durations_are_one_error(tmp_path, dur):
    p = _write(tmp_path, _trace(_ev(dur=dur)))
    with pytest.raises(TraceFormatError, match="out of range"):
        read_kineto(p)


def test_deep_nesting_in_args_is_one_error(tmp_path):
    deep = "[" * 5000 + "]" * 5000
    for name in ("aten::mm", "record_param_comms"):
        doc = json.dumps(_trace(_ev(name=name, args={"Input Dims": "X"}))).replace('"X"', deep)
        p = _write(tmp_path, doc)
        with pytest.raises(TraceFormatError, match="nested too deeply"):
            read_kineto(p)


@pytest.mark.parametrize(
    ("node", "problem"),
    [
        (f'{{"id": {BIG}}}', r"<= 9223372036854775807 - at `\$.nodes\[0\].id`"),
        (f'{{"id": 1, "ctrl_deps": {BIG}}}', "ctrl_deps"),
        ('{"id": 1, "inputs": {"values": ' + "[" * 5000 + "]" * 5000 + "}}", "nested too deeply"),
    ],
)
def test_execution_trace_huge_ids_and_deep_inputs(tmp_path, node, problem):
    p = _write(tmp_path, '{"schema": "1.0.1", "pid": 1, "nodes": [' + node + "]}", "et.json")
    with pytest.raises(TraceFormatError, match=problem) as info:
        read_pytorch_et(p)
    assert str(info.value).startswith(str(p))


def test_execution_trace_huge_attr_value_is_ignored(tmp_path):
    node = f'{{"id": 1, "attrs": [{{"name": "rf_id", "type": "uint64", "value": {BIG}}}]}}'
    p = _write(tmp_path, '{"schema": "1.0.1", "pid": 1, "nodes": [' + node + "]}", "et.json")
    assert read_pytorch_et(p).num_nodes == 1


# -- 3. errors cross process boundaries ----------------------------------------------------------


def test_errors_pickle_intact():
    from lumos.errors import MissingDependencyError, OutputError

    for err in (
        TraceFormatError("a.json", "bad"),
        InputError(None, "x"),
        OutputError("out", "disk full"),
        MissingDependencyError("dask", "dask", "running on a cluster"),
        ConfigError("nope"),
    ):
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err) and str(back) == str(err)
        assert getattr(back, "path", None) == getattr(err, "path", None)


def test_one_bad_rank_among_workers_is_one_line(tmp_path):
    good = _write(tmp_path, _trace(distributedInfo={"rank": 0, "world_size": 2}), "good.json")
    bad = _write(tmp_path, '{"traceEvents": [{"ph": "X", ', "bad.json")
    proc = _cli("replay", str(good), str(bad), "--workers", "2", "-o", str(tmp_path / "out"))
    line = _one_error_line(proc)
    assert str(bad) in line and "invalid JSON" in line


# -- 6. archives and odd files -------------------------------------------------------------------


def _tar(path: Path, members: list[tuple[str, bytes]], mode: str = "w:gz") -> Path:
    with tarfile.open(path, mode) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_many_member_archive_is_sniffed_in_one_pass(tmp_path):
    doc = json.dumps(_trace()).encode()
    p = _tar(tmp_path / "many.tar.gz", [(f"r{i:05d}.json", doc) for i in range(16_000)])
    code = (
        "from lumos.ingest.detect import expand_paths\n"
        f"refs = expand_paths([{str(p)!r}])\n"
        "print(len(refs), refs[0].member, refs[-1].member)\n"
    )
    proc = _run_child(code)  # 43 s when members were read in name order; ~2 s in one pass
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["16000", "r00000.json", "r15999.json"]


def test_duplicate_member_names_are_refused(tmp_path):
    a = json.dumps(_trace()).encode()
    b = json.dumps(_trace(_ev(ts=150.0))).encode()
    p = _tar(tmp_path / "dup.tar", [("rank0.json", a), ("rank0.json", b)], "w")
    with pytest.raises(InputError, match=r"two members named 'rank0\.json'"):
        expand_paths([p])
    with pytest.raises(InputError, match="two members of this name"):
        read_bytes(p, "rank0.json")


def test_members_of_an_archive_read_their_own_bytes(tmp_path):
    a = json.dumps(_trace()).encode()
    b = json.dumps(_trace(_ev(ts=150.0))).encode()
    p = _tar(tmp_path / "two.tar.gz", [("rank1.json", b), ("rank0.json", a)])
    refs = expand_paths([p])
    assert [r.member for r in refs] == ["rank0.json", "rank1.json"]
    assert refs[0].read() == a and refs[1].read() == b


def test_pipe_is_read_once(tmp_path):
    p = _write(tmp_path, _trace())
    code = (
        "import os, sys, threading\n"
        "from lumos.cli.main import main\n"
        "r, w = os.pipe()\n"
        f"data = open({str(p)!r}, 'rb').read()\n"
        "def feed():\n"
        "    os.write(w, data); os.close(w)\n"
        "threading.Thread(target=feed).start()\n"
        "sys.exit(main(['info', f'/dev/fd/{r}']))\n"
    )
    proc = _run_child(code)
    assert proc.returncode == 0, proc.stderr
    assert "[kineto]" in proc.stdout


def test_device_is_refused_not_read(tmp_path):
    line = _one_error_line(_cli("info", "/dev/zero"))
    assert "/dev/zero: is a device" in line


def test_gzip_cut_after_200_bytes_says_truncated(tmp_path):
    doc = json.dumps(_trace(*[_ev(ts=100.0 + i) for i in range(2000)])).encode()
    p = _write(tmp_path, zlib.compress(doc, 6, wbits=31)[:200], "cut.json.gz")
    line = _one_error_line(_cli("info", str(p)))
    assert str(p) in line and "truncated gzip" in line
    with pytest.raises(InputError, match="truncated"):
        read_kineto(p)


# -- 7. silently wrong ---------------------------------------------------------------------------


@pytest.mark.parametrize("ts", [1e12, 1e18, 1e300])
def test_one_event_far_outside_the_trace_is_dropped_and_counted(ts):
    t = trace_from_bytes(json.dumps(_trace(_ev(name="far", ts=ts))).encode(), "t.json")
    assert t.diagnostics["events_with_out_of_range_ts_dropped"] == 1
    assert "far" not in {t.names[i] for i in t.events.name_idx}
    assert int(t.events.ts_ns.max()) < 1_000_000


def test_many_events_out_of_range_are_an_error(tmp_path):
    far = [_ev(name="far", ts=1e18) for _ in range(3)]
    with pytest.raises(TraceFormatError, match="out of range"):
        read_kineto(_write(tmp_path, _trace(*far)))


def test_duplicate_correlation_ids_are_counted(tmp_path):
    again = _ev(cat="cuda_runtime", name="cudaLaunchKernel", ts=110.0, dur=2.0,
                args={"correlation": 5})  # fmt: skip
    t = read_kineto(_write(tmp_path, _trace(again)))
    assert t.diagnostics["duplicate_correlation_ids"] == 2
    assert "duplicate_correlation_ids" not in read_kineto(_write(tmp_path, _trace())).diagnostics


def test_error_is_a_lumos_error():
    assert issubclass(TraceFormatError, LumosError)
