"""The streamed Perfetto file of a real replay holds the same events as the dict it stands
for (columns formatted by numpy or compiled code alike), plain and gzip."""

from __future__ import annotations

import gzip
import json

import pytest
from tests import kernel_sides as sides
from tests.realdata import trace

from lumos.replay import build_workload, replay
from lumos.report import json_columns
from lumos.report.perfetto import to_chrome_trace, write_chrome_trace


@pytest.mark.parametrize("compiled", [False, True])
def test_df_index_resolver_file_parses_to_the_dict(tmp_path, monkeypatch, compiled) -> None:
    w, _ = build_workload([trace("v100_stream_wait_event")], workers=1)
    rep = replay(w)
    expected = json.loads(json.dumps(to_chrome_trace(None, rep.result)))
    if not compiled:  # the kernel's source, run as Python
        twin = sides.interpreted("lumos.report._kernels")
        monkeypatch.setattr(json_columns, "_format_rows", twin.format_rows)
    write_chrome_trace(tmp_path / "r.json", None, rep.result)
    write_chrome_trace(tmp_path / "r.json.gz", None, rep.result)
    got = json.loads((tmp_path / "r.json").read_bytes())
    assert len(got["traceEvents"]) == len(expected["traceEvents"]) > 70_000
    assert got == expected
    assert (
        gzip.decompress((tmp_path / "r.json.gz").read_bytes()) == (tmp_path / "r.json").read_bytes()
    )
