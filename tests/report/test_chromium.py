"""The report in a real browser: headless Chromium renders every chart with no script error,
and screenshots at two widths show marks (bars, lines) inside every visible chart's plotting area.

Needs Debian's ``chromium`` (``apt-get install chromium``); skipped with a reason without it.
The screenshots are saved under ``$LUMOS_TEST_ARTIFACTS`` (default ``out/artifacts`` in the
checkout, which git ignores) for a human to look at.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import lumos.report.html as report_html
from lumos.report.html import read_replay, write_report
from lumos.report.svg import PALETTE

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

    shot = _artifacts() / "report.png"
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


def _artifacts() -> Path:
    out = Path(
        os.environ.get("LUMOS_TEST_ARTIFACTS", Path(__file__).parents[2] / "out" / "artifacts")
    )
    out.mkdir(parents=True, exist_ok=True)
    return out


_INK = [[int(c[i : i + 2], 16) for i in (1, 3, 5)] for c in PALETTE if c != "#999999"]

# Loads a screenshot (as a data: URL, so the canvas may read it) and counts, inside each box,
# the pixels painted in a series colour; the counts land on <body data-ink>.
_COUNTER = """<!DOCTYPE html><html><body><script>
var boxes=BOXES,ink=INK,img=new Image();
img.onload=function(){var c=document.createElement('canvas');c.width=img.width;c.height=img.height;
var g=c.getContext('2d');g.drawImage(img,0,0);
document.body.dataset.ink=boxes.map(function(b){var d=g.getImageData(b[0],b[1],b[2],b[3]).data,n=0;
for(var i=0;i<d.length;i+=4){for(var k=0;k<ink.length;k++){var q=ink[k];
if(Math.abs(d[i]-q[0])+Math.abs(d[i+1]-q[1])+Math.abs(d[i+2]-q[2])<=24){n++;break}}}return n}).join(',');};
img.src='data:image/png;base64,PNG';
</script></body></html>"""


def _ink(shot: Path, boxes: list[list[int]], home: Path) -> list[int]:
    """Series-coloured pixels of the screenshot inside each box (x, y, w, h), counted by
    Chromium's own PNG decoder."""
    page = home / "count_ink.html"
    page.write_text(
        _COUNTER.replace("BOXES", json.dumps(boxes))
        .replace("INK", json.dumps(_INK))
        .replace("PNG", base64.b64encode(shot.read_bytes()).decode())
    )
    res = _chromium("--dump-dom", page.as_uri(), home=home)
    assert res.returncode == 0, res.stderr[-2000:]
    got = _body(res.stdout).get("ink")
    assert got is not None, "the screenshot did not load"
    return [int(v) for v in got.split(",")] if got else []


def _body(dom: str) -> dict[str, str]:
    tag = re.search(r"<body[^>]*>", dom)
    assert tag is not None
    return dict(re.findall(r'data-([a-z-]+)="([^"]*)"', tag.group(0)))


def _shoot(
    html: Path, width: int, name: str, home: Path, fragment: str = "", screenshot: bool = True
) -> tuple[dict[str, str], list[list[int]], list[int]]:
    """Lay the page out at ``width``, read back where the visible charts' plotting areas are,
    then (``screenshot``) take the whole page and count the marks inside each of them."""
    url = html.resolve().as_uri() + fragment
    scale = "--force-device-scale-factor=1"
    dom = _chromium(scale, f"--window-size={width},900", "--dump-dom", url, home=home)
    assert dom.returncode == 0, dom.stderr[-2000:]
    body = _body(dom.stdout)
    assert "js-errors" not in body, body
    boxes = [[int(v) for v in b.split(",")] for b in body.get("plots", "").split(";") if b]
    if not screenshot:
        return body, boxes, []
    shot = _artifacts() / f"report_{name}_{width}.png"
    res = _chromium(scale, f"--window-size={width},{body['height']}", f"--screenshot={shot}", url,
                    home=home)  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    return body, boxes, _ink(shot, boxes, home)


def _empty(ink: list[int]) -> list[int]:
    """Positions (page order) of the visible charts with no marks in their plotting area."""
    return [i for i, n in enumerate(ink) if n < 50]


def _multi_rank() -> dict:
    """The fixture as a 3-rank replay; rank 2 is the slowest and has a long SM curve (3,000
    bins of 1 ms: drawn with wider bins)."""
    data = read_replay(FIXTURE)
    ranks = []
    for r, factor in ((0, 1.0), (1, 1.1), (2, 1.3)):
        rank = copy.deepcopy(data)
        rank["rank"] = r
        rank["steps"] = [
            dict(s, predicted_ns=int(s["predicted_ns"] * factor)) for s in rank["steps"]
        ]
        ranks.append(rank)
    sm = ranks[2]["sm_util"]
    sm["measured"] = [((i // 7) % 10) / 10 for i in range(3000)]
    sm["predicted"] = [((i // 5) % 10) / 10 for i in range(3000)]
    return dict(data, ranks=ranks)


@pytest.mark.parametrize("width", [1280, 600])
def test_every_chart_has_marks_at_two_widths(tmp_path, width):
    html = write_report(read_replay(FIXTURE), tmp_path / "report.html")
    body, boxes, ink = _shoot(html, width, "single", tmp_path)
    assert len(boxes) == int(body["charts"]) == 4
    assert all(b[2] > 0.6 * (min(width, 960) - 90) for b in boxes)  # about the card's width
    assert _empty(ink) == []


def test_rank_selector_shows_one_rank_and_its_charts_have_marks(tmp_path):
    html = write_report(_multi_rank(), tmp_path / "report.html")
    body, boxes, ink = _shoot(html, 1280, "ranks", tmp_path)
    assert body["rank"] == "2"  # starts on the slowest rank
    assert int(body["charts"]) == 12 and len(boxes) == 4  # the other ranks' charts are hidden
    assert _empty(ink) == []
    body, boxes, _ = _shoot(html, 1280, "ranks_all", tmp_path, "#rank=all", screenshot=False)
    assert body["rank"] == "all" and len(boxes) == 12
    body, boxes, _ = _shoot(html, 1280, "ranks_0", tmp_path, "#rank=0", screenshot=False)
    assert body["rank"] == "0" and len(boxes) == 4
    body, _, _ = _shoot(html, 1280, "ranks_bad", tmp_path, "#rank=99", screenshot=False)
    assert body["rank"] == "2"  # an unknown rank falls back to the slowest


def _long_names() -> dict:
    """The 3-rank fixture with long kernel names in every rank's tables, and a rank's top
    kernels and ops (what ``lumos replay --analysis`` adds)."""
    name = "void cutlass::Kernel<" + "cutlass_80_tensorop_s1688fprop_optimized_tf32" * 3 + ">"
    row = {"delay_ns": 1000, "kernel": name, "share": 0.25, "task_ns": 2_000_000, "tasks": 7}
    top = {"kernel": name, "class": "comm", "count": 5, "total_ns": 9_506_000, "share": 0.754,
           "exposed_ns": 9_389_000, "exposed_share": 0.988, "gain": "+49.0 %"}  # fmt: skip
    data = _multi_rank()
    for r in data["ranks"]:
        r["critical_path_kernels"] = [row] * 3
        r["top_kernels"] = [top] * 3
    return data


@pytest.mark.parametrize("width", [1400, 600])
def test_long_names_wrap_between_parts_and_numbers_stay_whole(tmp_path, width):
    """Kernel names are long (``void cutlass::Kernel<cutlass_80_tensorop_...>``): at 600 px the
    critical-path tables overflowed the card, then wrapped anywhere ("com m", "58.4 %" on two
    lines). Now no table is wider than its card (a wide one scrolls in its box), no word of
    a visible cell breaks across lines and no number leaves its unit, at 1,400 and 600 px."""
    html = write_report(_long_names(), tmp_path / "report.html")
    body, _, _ = _shoot(html, width, f"long_names_{width}", tmp_path, screenshot=False)
    assert (body["wide"], body["broken"]) == ("0", "0")
    body, _, _ = _shoot(html, width, "long_names_all", tmp_path, "#rank=all", screenshot=False)
    assert (body["wide"], body["broken"]) == ("0", "0")


def test_the_check_fails_when_words_break(tmp_path, monkeypatch):
    """The check itself: with cells allowed to break anywhere (the former style), the 600 px
    page has broken words."""
    monkeypatch.setattr(report_html, "_CSS", report_html._CSS + "td,th{overflow-wrap:anywhere;"
                        "white-space:normal!important}.tw{overflow-x:visible}")  # fmt: skip
    html = write_report(_long_names(), tmp_path / "report.html")
    body, _, _ = _shoot(html, 600, "broken", tmp_path, screenshot=False)
    assert int(body["broken"]) > 0


def test_the_check_fails_when_a_chart_is_empty(tmp_path, monkeypatch):
    """The screenshot check itself: a step-time chart drawn without its bars is reported."""
    real = report_html.to_svg

    def no_bars(fig):
        out = real(fig)
        return re.sub(r'<rect class="bar".*?</rect>', "", out) if fig.name == "step_time" else out

    monkeypatch.setattr(report_html, "to_svg", no_bars)
    html = write_report(read_replay(FIXTURE), tmp_path / "report.html")
    _, boxes, ink = _shoot(html, 1280, "empty", tmp_path)
    assert len(boxes) == 4 and _empty(ink) == [0]
