"""The HTML report of a replay result: content, determinism, offline, and input errors."""

from __future__ import annotations

import gzip
import json
import re
import sys
from pathlib import Path

import pytest

from lumos.cli.main import main
from lumos.errors import InputError, MissingDependencyError
from lumos.report.figures import MAX_SM_POINTS, build_figures, coarsen, write_figures
from lumos.report.html import read_replay, render_report, validate_replay, write_report

FIXTURE = Path(__file__).parent / "data" / "replay.json"


@pytest.fixture
def replay() -> dict:
    return read_replay(FIXTURE)


def test_report_has_every_section(replay):
    html = render_report(replay)
    assert html.startswith("<!DOCTYPE html>")
    assert html.count('<svg xmlns="http://www.w3.org/2000/svg" class="chart"') == 4
    for heading in ("Per-step time", "Breakdown", "SM utilization (GPU streams busy)", "Critical path",
                    "Top kernels (measured)", "Top ops (measured)", "What-if estimates", "Traces",
                    "Run"):  # fmt: skip
        assert f"<h2>{heading}</h2>" in html
    assert 'href="replay.perfetto.json"' in html
    assert "ncclDevKernel_AllReduce" in html.replace("<wbr>", "")  # long names may wrap at "_"
    # error is recomputed from the times: (40.65 - 41.2) / 41.2
    assert "-1.33 %" in html and "41.200" in html


def test_report_is_offline_and_deterministic(replay):
    html = render_report(replay)
    assert html == render_report(read_replay(FIXTURE))
    external = re.findall(r'(?:src|href)="(https?:[^"]*)"', html)
    assert external == ["https://ui.perfetto.dev"]  # a link for the reader, never a resource
    assert "<link" not in html and "<script src" not in html


def test_minimal_result_renders(tmp_path):
    data = {"steps": [{"name": "s", "measured_ns": 10, "predicted_ns": 11}]}
    out = write_report(data, tmp_path / "r.html", title="Mini")
    html = out.read_text()
    assert "<title>Mini</title>" in html and html.count('class="chart"') == 1
    assert "+10.00 %" in html


def test_cpu_only_run_has_no_sm_curve(replay):
    data = dict(
        replay, sm_util={"bin_ns": 1_000_000, "device": -1, "measured": [], "predicted": []}
    )
    names = [f.name for f in build_figures(validate_replay(data))]
    assert names == ["step_time", "breakdown", "critical_path"]
    assert "SM utilization" not in render_report(data)


def test_gzip_input_and_critical_path_share_form(tmp_path, replay):
    data = dict(json.loads(FIXTURE.read_text()))
    data["critical_path"] = {"share": data["critical_path"]}
    data["what_if"] = {"rows": data["what_if"]}
    p = tmp_path / "replay.json.gz"
    p.write_bytes(gzip.compress(json.dumps(data).encode()))
    loaded = read_replay(p)
    assert loaded["critical_path"] == replay["critical_path"]
    assert loaded["what_if"] == replay["what_if"]


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ([], "must be a JSON object"),
        ({}, "non-empty 'steps'"),
        ({"steps": [{"name": "s", "measured_ns": "1", "predicted_ns": 1}]}, r"steps\[0\] needs"),
        ({"steps": [{"measured_ns": -1, "predicted_ns": 1}]}, "negative"),
        (
            {"steps": [{"measured_ns": 1, "predicted_ns": 1}], "breakdown": {"measured": 3}},
            "breakdown",
        ),
        ({"steps": [{"measured_ns": 1, "predicted_ns": 1}], "sm_util": {"bin_ns": 0}}, "sm_util"),
        (
            {"steps": [{"measured_ns": 1, "predicted_ns": 1}], "critical_path": {"a": "x"}},
            "critical_path",
        ),
        ({"steps": [{"measured_ns": 1, "predicted_ns": 1}], "top_kernels": [1]}, "top_kernels"),
    ],
)
def test_bad_results_name_the_file(tmp_path, data, needle):
    p = tmp_path / "replay.json"
    p.write_text(json.dumps(data))
    with pytest.raises(InputError, match=needle) as exc:
        read_replay(p)
    assert str(exc.value).startswith(str(p))


def test_not_json_and_missing_file(tmp_path):
    p = tmp_path / "replay.json"
    p.write_text("{oops")
    with pytest.raises(InputError, match="not valid JSON"):
        read_replay(p)
    with pytest.raises(InputError, match="no such file"):
        read_replay(tmp_path / "nope.json")


def test_figures_svg_files(tmp_path, replay):
    paths = write_figures(replay, tmp_path)
    assert [p.name for p in paths] == [
        "step_time.svg", "breakdown.svg", "sm_util.svg", "critical_path.svg",
    ]  # fmt: skip
    assert all(p.read_text().startswith("<svg") for p in paths)
    assert [f.name for f in build_figures(validate_replay({"steps": replay["steps"]}))] == [
        "step_time"
    ]


def test_png_figures_need_the_plot_extra(tmp_path, replay, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(MissingDependencyError, match=r"lumos\[plot\]"):
        write_figures(replay, tmp_path, ("png",))


def test_png_figures_with_matplotlib(tmp_path, replay):
    pytest.importorskip("matplotlib")
    paths = write_figures(replay, tmp_path, ("png",))
    assert len(paths) == 4 and all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in paths)


def test_cli_report(tmp_path, capsys):
    src = tmp_path / "replay.json"
    src.write_text(FIXTURE.read_text())
    assert main(["report", str(tmp_path), "--figures", str(tmp_path / "fig")]) == 0
    assert (tmp_path / "report.html").is_file() and (tmp_path / "fig" / "sm_util.svg").is_file()
    assert main(["report", str(tmp_path / "missing.json")]) == 1
    assert "missing.json: no such file" in capsys.readouterr().err


def test_trace_links_accept_a_string_and_list_measured_sources(replay):
    data = dict(replay, perfetto="replay.perfetto.json",
                sources=["/abs/run/rank0.kineto.json.gz", "replay.perfetto.json"])  # fmt: skip
    html = render_report(data)
    assert html.count('href="replay.perfetto.json"') == 1
    assert (
        '<a href="file:///abs/run/rank0.kineto.json.gz">measured: rank0.kineto.json.gz</a>' in html
    )


def test_report_defines_its_words_and_lists_critical_path_ops(replay):
    ops = [{"op": "aten::empty", "tasks": 1590, "task_ns": 52054373, "delay_ns": 63538136,
            "share": 0.1689}]  # fmt: skip
    html = render_report({**replay, "critical_path_ops": ops})
    assert "<h3>Top ops on the critical path</h3>" in html
    assert "aten::empty" in html and "52.054" in html and "16.9 %" in html
    words = html.split("<h2>Words</h2>")[1]
    for term in ("exposed compute", "exposed comm", "overlapped", "other", "delay"):
        assert f"<dt>{term}</dt>" in words
    assert "<h3>Top ops" not in render_report(replay)


def test_numeric_headers_align_with_their_numbers(replay):
    html = render_report(replay)
    steps = re.search(r'<table class="sortable steps">(.*?)</table>', html).group(1)
    heads = re.findall(r"<th([^>]*)>([^<]*)</th>", steps)
    assert heads == [("", "step"), (" class=num", "measured ms"),
                     (" class=num", "predicted ms"), (" class=num", "error")]  # fmt: skip
    assert "td.num,th.num{text-align:right" in html


def test_long_sm_curves_get_wider_bins(replay):
    """10,000 bins of 1 ms are drawn as 239 points of 42 ms (each the mean of 42 bins)."""
    long = dict(replay, sm_util={"bin_ns": 1_000_000, "measured": [i % 2 for i in range(10_000)],
                                 "predicted": [0.25] * 10_000})  # fmt: skip
    (sm,) = [f for f in build_figures(long) if f.name == "sm_util"]
    assert MAX_SM_POINTS == 240
    assert [len(v) for _, v in sm.series] == [239, 239]
    assert sm.x_step == 42.0 and "each 42 ms bin" in sm.title
    assert sm.series[0][1][:2] == (50.0, 50.0) and sm.series[1][1][0] == 25.0
    assert sm.series[0][1][-1] == 50.0  # the last, shorter bin: 10,000 - 238 * 42 = 4 bins
    assert coarsen((1.0, 2.0, 3.0), 1) == (1.0, 2.0, 3.0)
    (short,) = [f for f in build_figures(replay) if f.name == "sm_util"]
    assert short.x_step == 1.0 and len(short.series[0][1]) == len(replay["sm_util"]["measured"])


def test_charts_fill_the_card(replay):
    html = render_report(replay)
    assert "svg.chart{width:100%;height:auto" in html
    assert html.count('viewBox="0 0 880 ') == 4


_SVG_NS = "{http://www.w3.org/2000/svg}"
_BREAKDOWN = {"exposed_compute_ns": 30_000_000, "overlapped_ns": 5_000_000,
              "exposed_comm_ns": 4_000_000, "other_ns": 1_250_000}  # fmt: skip
# What a hovered mark says, by mark: a value and its unit (ms or %), nothing bare.
_HOVER = {
    "bar": re.compile(r".+ · .+: [\d,]+\.\d+ (ms|%)"),
    "series": re.compile(r"\w+: mean \d+\.\d %, peak \d+\.\d %"),
    "hover": re.compile(r"[\d,]+ ms: \w+ \d+\.\d %(, \w+ \d+\.\d %)*"),
}


def _hovers(html: str) -> list[tuple[str, str]]:
    """(mark class, hover text) of every mark of every chart in the page."""
    import xml.etree.ElementTree as ET

    out = []
    for svg in re.findall(r'<svg xmlns="http://www.w3.org/2000/svg" class="chart".*?</svg>', html,
                          flags=re.S):  # fmt: skip
        for el in ET.fromstring(svg).iter():
            title = el.find(_SVG_NS + "title")
            if el.get("class") in _HOVER and title is not None:
                out.append((el.get("class"), title.text))
    return out


def test_every_chart_hovers_with_its_unit(replay):
    """Issue 14: units in tooltips, in every chart of the report (steps, breakdown, SM
    utilization, critical path, the what-if breakdown), for one rank and for several."""
    what_if = [{"config": {"label": label}, "step_ns": step, "breakdown": _BREAKDOWN}
               for label, step in (("baseline", 40_250_000), ("tp=2", 30_000_000))]  # fmt: skip
    one = dict(replay, what_if=what_if)
    two = dict(one, ranks=[dict(replay, rank=0), dict(replay, rank=1)])
    for data in (one, two):
        hovers = _hovers(render_report(data))
        assert {cls for cls, _ in hovers} == set(_HOVER)
        bad = [(cls, text) for cls, text in hovers if not _HOVER[cls].fullmatch(text)]
        assert not bad, bad[:5]
    hovers = [text for _, text in _hovers(render_report(one))]
    assert "measured · ProfilerStep#2: 41.200 ms" in hovers  # as the steps table shows it
    assert "predicted · exposed comm: 10.400 ms" in hovers
    assert "tp=2 · other: 1.250 ms" in hovers  # the what-if chart
    assert "critical path · compute: 71.0 %" in hovers
    assert sum(t.startswith("0 ms: measured ") for t in hovers) == 1  # SM utilization's first bin


def test_figures_carry_the_unit_of_their_values(replay):
    units = {f.name: f.unit for f in build_figures(replay)}
    assert units == {"step_time": "ms", "breakdown": "ms", "sm_util": "%", "critical_path": "%"}


def test_one_naming_style_for_what_users_read(replay, capsys):
    """Issue 14: one naming style. Labels are lower-case words with the unit last (``measured
    ms``), never machine keys (``exposed_comm (ms)``, ``cpu_op``), and the breakdown's parts
    and task kinds read the same in the charts, the tables, the words and ``lumos replay``."""
    from lumos.cli.replay import format_replay
    from lumos.report.labels import BREAKDOWN_LABELS

    data = dict(replay, critical_path={"cpu_op": 0.25, "kernel": 0.25, "delay": 0.5},
                critical_path_ops=[{"delay_ns": 1_000_000, "op": "aten::mm", "share": 0.5,
                                    "task_ns": 2_000_000, "tasks": 3}],
                critical_path_kernels=[{"kernel": "sgemm", "tasks": 3, "task_ns": 1_500_000,
                                        "delay_ns": 0, "share": 0.25}])  # fmt: skip
    html = render_report(data)
    heads = set(re.findall(r"<th[^>]*>([^<]*)</th>", html))
    assert not [h for h in heads if "_" in h or "(" in h], heads
    parts = list(BREAKDOWN_LABELS.values())
    assert parts == ["exposed compute", "overlapped", "exposed comm", "other"]
    assert {f"{p} ms" for p in parts} <= heads  # the breakdown table
    assert {"view", "task ms", "delay ms", "measured ms", "predicted ms"} <= heads
    legend = re.search(r"Where the time goes</text>(.*?)<line", html, flags=re.S).group(1)
    assert re.findall(r'y="37">([^<]*)</text>', legend) == parts
    words = re.findall(r"<dt>([^<]*)</dt>", html)
    assert words[:4] == ["exposed compute", "exposed comm", "overlapped", "other"]
    cp = html.split("<h2>Critical path</h2>")[1]
    assert "<td>CPU op</td>" in cp and "critical path · CPU op: 25.0 %" in cp
    assert "cpu_op" not in cp
    assert "<h3>Top kernels on the critical path</h3>" in cp and "<td>sgemm</td>" in cp
    # replay.json sorts its keys; the tables still read name first, as lumos replay prints them
    for what, key in (("ops", "op"), ("kernels", "kernel")):
        table = cp.split(f"<h3>Top {what} on the critical path</h3>")[1].split("</thead>")[0]
        assert re.findall(r"<th[^>]*>([^<]*)</th>", table) == [
            key, "tasks", "task ms", "delay ms", "share"]  # fmt: skip
    doc = {"rank": 0, "steps": [{"name": "s", "measured_ns": 10, "predicted_ns": 10,
                                  "error": 0.0}], "error": {"mean_abs": 0.0, "max_abs": 0.0},
           "breakdown": {"measured": _BREAKDOWN, "predicted": _BREAKDOWN},
           "critical_path": data["critical_path"]}  # fmt: skip
    lines = format_replay(doc).splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("  breakdown"))
    assert [ln.split("  ")[1].strip() for ln in lines[at + 1 : at + 5]] == parts
    text = "\n".join(lines)
    assert "critical path: CPU op 25%, kernel 25%, delay 50%" in text


def test_report_shows_the_analysis_tables_a_replay_wrote(tmp_path):
    # `lumos replay --analysis` writes analysis/kernels.csv and ops.csv beside replay.json;
    # the report shows each rank's top rows (the recording) in that rank's sections, titled
    # with the rank, which the rank selector switches
    run = Path(__file__).parents[1] / "data" / "whatif_pairs" / "ddp_layers_x2"
    assert main(["replay", str(run), "--analysis", "-o", str(tmp_path)]) == 0
    assert main(["report", str(tmp_path)]) == 0
    html = (tmp_path / "report.html").read_text()
    lines = (tmp_path / "analysis" / "kernels.csv").read_text().splitlines()[1:]
    for rank in (0, 1):
        first = next(x for x in lines if x.startswith(f"measured,{rank},")).split(",")
        sections = re.findall(r'<section data-rank="(\d+)"><h2>rank (\d+): Top (kernels|ops) '
                              r"\(measured\)</h2>(.*?)</section>", html)  # fmt: skip
        mine = {what: body for sec, r, what, body in sections if sec == r == str(rank)}
        assert set(mine) == {"kernels", "ops"}
        assert _escape(first[2]).split(",")[0] in mine["kernels"].replace("<wbr>", "")
        assert mine["kernels"].count("<tr>") == 1 + min(15, _rows(tmp_path, "kernels.csv", rank))
    assert "<h2>Top kernels" not in html  # no table left without its rank


def _escape(name: str) -> str:
    from html import escape

    return escape(name)


def _rows(out, name, rank=0):
    lines = (out / "analysis" / name).read_text().splitlines()[1:]
    return sum(1 for x in lines if x.startswith(f"measured,{rank},"))


def test_a_cpu_only_run_speaks_of_the_cpu_not_of_gpu_time(replay):
    data = dict(
        replay, sm_util={"bin_ns": 1_000_000, "device": -1, "measured": [], "predicted": []}
    )
    words = render_report(data).split("<h2>Words</h2>")[1]
    assert "GPU time" not in words and "time when the CPU computes" in words
    gpu_words = render_report(replay).split("<h2>Words</h2>")[1]
    assert "GPU time when compute kernels run" in gpu_words


def test_long_kernel_names_are_folded_with_the_full_name_on_hover():
    from lumos.report.html import short_name

    name = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
            "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, "
            "at::detail::Array<char*, 1>)")  # fmt: skip
    assert short_name(name) == "void at::native::vectorized_elementwise_kernel<…>(…)"
    assert short_name("aten::mm") == "aten::mm"
    assert short_name("k" * 100) == "k" * 71 + "…"
    data = {"steps": [{"name": "s", "measured_ns": 10, "predicted_ns": 11}],
            "top_kernels": [{"name": name, "total_ns": 5}]}  # fmt: skip
    html = render_report(data)
    assert '<span title="void at::native::vectorized_elementwise_kernel&lt;4,' in html
    shown = ">void at::<wbr>native::<wbr>vectorized_<wbr>elementwise_<wbr>kernel&lt;…&gt;(…)</span>"
    assert shown in html  # may wrap between its parts, never inside a word
    short = render_report({**data, "top_kernels": [{"name": "aten::mm", "total_ns": 5}]})
    assert "<td>aten::mm</td>" in short  # a short name is left whole


def test_the_breakdown_says_it_is_a_total_and_why_comm_differs(replay):
    bd = {"measured": {"exposed_compute_ns": 50, "overlapped_ns": 0, "exposed_comm_ns": 40,
                       "other_ns": 10},
          "predicted": {"exposed_compute_ns": 50, "overlapped_ns": 0, "exposed_comm_ns": 2,
                        "other_ns": 48}}  # fmt: skip
    steps = [{"name": f"s{i}", "measured_ns": 33, "predicted_ns": 33} for i in range(3)]
    html = render_report({**replay, "steps": steps, "breakdown": bd})
    section = html.split("Breakdown</h2>")[1].split("</section>")[0]
    assert "Totals over the 3 steps of the window." in section
    assert "also holds its wait for the other ranks" in section
    same = {"measured": bd["measured"], "predicted": bd["measured"]}
    section = render_report({**replay, "breakdown": same}).split("Breakdown</h2>")[1]
    assert "holds its wait" not in section.split("</section>")[0]


def test_numbers_given_as_text_with_their_unit_are_numbers():
    """``lumos advise``'s gains ("+49.0 %") are text: shown right-aligned like numbers and kept
    on one line (the page's style: no wrap inside a number cell)."""
    data = {"steps": [{"name": "s", "measured_ns": 10, "predicted_ns": 11}],
            "top_ops": [{"op": "aten::mm", "gain": "+49.0 %"}, {"op": "x", "gain": "12 ms"}]}  # fmt: skip
    html = render_report(data)
    assert '<td class="num">+49.0 %</td>' in html and '<td class="num">12 ms</td>' in html
    assert "<th class=num>gain</th>" in html and "<td>aten::mm</td>" in html
    assert "td.num,th.num,.card .v{white-space:nowrap}" in html
