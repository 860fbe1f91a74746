"""CLI polish from issue 14: argument checks, ``-v`` anywhere, tables instead of reprs, and
mistakes caught in one line before any work."""

from __future__ import annotations

import importlib.util
import json

import pytest
from tests.realdata import TRACES, realdata

from lumos import parallel
from lumos.cli.main import main

SMALL = TRACES["cuda_event_sync"]


@pytest.mark.parametrize("value", ["0", "-3", "two"])
def test_workers_must_be_positive(value, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["replay", "x.json", "-o", str(tmp_path / "o"), "--workers", value])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("lumos replay: error: argument --workers:")


@pytest.mark.parametrize("verb", ["replay", "analyze", "convert", "estimate", "diff", "layers"])
def test_workers_help_shows_the_default(verb, capsys):
    with pytest.raises(SystemExit):
        main([verb, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"(default: {parallel.default_workers()}, the CPUs available, at most 8)" in text


def test_verbose_after_the_verb_shows_the_traceback(tmp_path, capsys):
    afile = tmp_path / "f"
    afile.write_text("")
    assert main(["replay", str(realdata(SMALL)), "-o", str(afile), "-v"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and err.strip().splitlines()[-1].startswith("lumos: error:")
    assert main(["replay", str(realdata(SMALL)), "-o", str(afile)]) == 1
    assert "Traceback" not in capsys.readouterr().err
    # nested verbs too
    assert main(["chakra", "generate", "--collective", "all_reduce", "--num-npus", "2", "-o",
                 str(afile), "-v"]) == 1  # fmt: skip
    assert "Traceback" in capsys.readouterr().err


def test_info_and_stats_print_tables_not_reprs(capsys):
    et = str(realdata(TRACES["chakra_pytorch_converted"]))
    simple = str(realdata(TRACES["simple_add_et"]))
    assert main(["info", et, simple]) == 0
    assert main(["chakra", "stats", et]) == 0
    out = capsys.readouterr().out
    assert "{" not in out and "[{" not in out and "['" not in out  # no dict or list reprs
    assert out.count("nodes by type: COMP_NODE 3643, COMM_COLL_NODE 21") == 2
    assert "    name                                     count" in out
    assert "    aten::empty                                  4" in out


@pytest.mark.skipif(importlib.util.find_spec("distributed") is None, reason="needs dask")
def test_unreachable_dask_is_one_line_before_the_work(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(parallel, "DASK_CONNECT_TIMEOUT_S", 1.0)
    out = tmp_path / "o"
    rc = main(["replay", str(realdata(SMALL)), "-o", str(out), "--dask", "tcp://127.0.0.1:9"])
    assert rc == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("lumos: error: --dask tcp://127.0.0.1:9: cannot reach the Dask")
    assert not (out / "replay.json").exists()


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is not None, reason="has matplotlib")
def test_report_png_without_matplotlib_writes_nothing(tmp_path, capsys):
    (tmp_path / "replay.json").write_text(json.dumps({"steps": [
        {"name": "s", "measured_ns": 10, "predicted_ns": 11}]}))  # fmt: skip
    assert main(["report", str(tmp_path), "--png", "--figures", str(tmp_path / "figs")]) == 1
    assert "pip install 'lumos[plot]'" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["replay.json"]
    assert main(["report", str(tmp_path), "--png"]) == 1
    assert "give --figures DIR" in capsys.readouterr().err


def test_no_help_text_carries_docstring_markup():
    """Verbs take their help from docstrings; ``literal`` and :func:`role` markup is stripped."""
    import argparse
    import re

    from lumos.cli.main import build_parser

    markup = re.compile(r"``|:(func|class|mod|meth|attr|data|exc):`")
    found = []

    def walk(p: argparse.ArgumentParser, name: str) -> None:
        for text in [p.description, *(a.help for a in p._actions)]:
            if isinstance(text, str) and markup.search(text):
                found.append((name, text[:60]))
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for verb, child in a.choices.items():
                    walk(child, f"{name} {verb}")

    walk(build_parser(), "lumos")
    assert found == []


def test_every_verb_and_tool_says_what_it_does():
    """Issue 14: every chakra tool has a description (``lumos chakra validate -h`` showed only
    usage and options), like every verb."""
    import argparse

    from lumos.cli.main import build_parser

    missing = []

    def walk(p: argparse.ArgumentParser, name: str) -> None:
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for verb, child in a.choices.items():
                    if not (child.description or "").strip():
                        missing.append(f"{name} {verb}")
                    walk(child, f"{name} {verb}")

    walk(build_parser(), "lumos")
    assert missing == []


def test_printing_a_trace_a_graph_or_a_result_gives_one_short_line():
    import lumos
    from lumos.examples_data import example_trace_path

    trace = lumos.read_kineto(example_trace_path())
    graph = lumos.build_graph(trace)
    result = lumos.simulate(graph)
    assert repr(trace).endswith("rank 0, 6361 events, 4 processors, 3 steps)")
    assert repr(graph).startswith("ExecGraph(rank 0 of 2: 2913 tasks,")
    assert repr(result).startswith("SimResult(1 rank(s), 2913 tasks, makespan ")
    assert repr(result.workload) == "Workload(1 rank(s) [0], 2913 tasks)"
    assert all(len(repr(x)) < 200 for x in (trace, graph, result))
    # what lumos.replay returns, too (it printed every summary, thousands of characters)
    from lumos.replay import replay  # lumos.replay is the module once another test imported it

    rep = replay(graph, scale=(("mm", 0.5),), without=("sync",))
    assert repr(rep).startswith("Replay(1 rank(s), 3 steps, makespan ")
    assert repr(rep).endswith(" ms, mm=0.5, without sync)") and len(repr(rep)) < 200


def test_printing_a_chakra_trace_or_workload_gives_one_short_line():
    """A ChakraTrace printed its metadata and every column (15,659 characters for chakra.0.et)."""
    from tests.realdata import astra_micro, realdata, trace

    import lumos

    one = lumos.read_chakra(trace("chakra_pytorch_converted"))
    assert repr(one).endswith("chakra.0.et', rank 0, schema '1.0.1', 3664 nodes)")
    many = lumos.read_chakra(realdata(astra_micro("all_reduce", 4)))
    assert repr(many).endswith("/4npus_1MB/all_reduce', 4 rank(s), 4 nodes)")
    assert repr(many).startswith("ChakraWorkload(")


def test_printing_a_linked_trace_gives_one_short_line():
    """A LinkedTrace printed both traces and every column (2,438 characters for simple_add)."""
    from tests.realdata import trace

    import lumos
    from lumos.link import link

    linked = link(lumos.read_pytorch_et(trace("simple_add_et")),
                  lumos.read_kineto(trace("simple_add_kineto")))  # fmt: skip
    assert repr(linked) == (
        "LinkedTrace(rank 0: 36 of 36 ET ops linked (100.0 %), 4 of 4 GPU activities on a node)"
    )


def test_top_level_help_lists_every_verb_with_its_own_help_without_importing_it():
    """``lumos --help`` and ``--version`` import no verb module; the help line each verb shows
    there is the one its own module registers."""
    import argparse
    import subprocess
    import sys

    from lumos.cli.main import VERB_HELP, build_parser

    full = build_parser()
    sub = next(a for a in full._actions if isinstance(a, argparse._SubParsersAction))
    assert {a.dest: a.help for a in sub._choices_actions} == VERB_HELP
    code = (
        "import sys\nfrom lumos.cli.main import main\n"
        "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('lumos.cli.') or m in "
        "('numpy', 'rich', 'msgspec', 'lumos.graph', 'lumos.sim')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "['lumos.cli.main']"


def _processes_with(marker: str) -> list[int]:
    """Pids of the processes whose environment holds ``marker`` (``NAME=value``)."""
    from pathlib import Path

    needle = marker.encode()
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if needle in environ.read_bytes().split(b"\0"):
                found.append(int(environ.parent.name))
        except OSError:  # gone, or another user's
            continue
    return found


@pytest.mark.skipif(not __import__("pathlib").Path("/proc/self/environ").exists(),
                    reason="needs /proc to list processes")  # fmt: skip
def test_a_command_leaves_no_process_running(tmp_path):
    """Nothing is compiled or warmed in the background, and worker pools end with their command:
    after ``lumos info`` and a two-worker ``lumos replay`` no process they started is left."""
    import os
    import subprocess
    import sys

    from lumos.examples_data import example_trace_path

    marker = f"LUMOS_TEST_LEFT_BEHIND={os.getpid()}"
    env = {**os.environ, "LUMOS_TEST_LEFT_BEHIND": str(os.getpid())}
    run = example_trace_path().parent
    for args in (["info", str(run)], ["replay", str(run), "--workers", "2", "-o", str(tmp_path)]):
        subprocess.run([sys.executable, "-m", "lumos", *args], env=env, check=True,
                       capture_output=True)  # fmt: skip
        assert _processes_with(marker) == [], args
