"""`-o` means the same thing in every verb: `-o/--out`, a DIR, a FILE or a PREFIX as its metavar
and help say, checked before any work starts."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

from lumos.cli.main import build_parser, main

#: Every verb that writes, and what its -o names. A new writing verb must be added here.
EXPECTED: dict[str, str] = {
    "collect": "dir",
    "demo": "dir",
    "report": "file",
    "replay": "dir",
    "analyze": "dir",
    "diff": "dir",
    "estimate": "dir",
    "advise": "dir",
    "link": "dir",
    "convert": "prefix",
    "chakra jsonize": "file",
    "chakra visualize": "file",
    "chakra timeline": "file",
    "chakra text2et": "prefix",
    "chakra generate": "dir",
    "chakra obfuscate": "prefix",
    "synth fit": "file",
    "synth sample": "prefix",
    "synth report": "dir",
    "bench": "dir",
}
_METAVAR = {"dir": "DIR", "file": "FILE", "prefix": "PREFIX"}
_HELP = {"dir": "output directory", "file": "output file", "prefix": "output prefix"}


def _verbs(parser: argparse.ArgumentParser, path: str = "") -> dict[str, argparse.ArgumentParser]:
    out: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                full = f"{path} {name}".strip()
                out[full] = child
                out.update(_verbs(child, full))
    return out


def _o(parser: argparse.ArgumentParser) -> argparse.Action | None:
    return next((a for a in parser._actions if "-o" in a.option_strings), None)


def test_every_o_option_is_spelled_the_same() -> None:
    verbs = _verbs(build_parser())
    with_o = {name: p for name, p in verbs.items() if _o(p) is not None}
    assert sorted(with_o) == sorted(EXPECTED)
    for name, parser in with_o.items():
        kind = EXPECTED[name]
        action = _o(parser)
        assert action is not None
        assert action.option_strings[:2] == ["-o", "--out"], name
        assert action.dest == "out", name
        assert action.metavar == _METAVAR[kind], name
        assert isinstance(action.help, str) and action.help.startswith(_HELP[kind]), name
        assert parser.get_default("out_kind") == kind, name
        if kind == "prefix":
            assert "PREFIX.<rank>.et" in action.help, name
    for name, parser in verbs.items():  # a verb that declares an output kind has a -o
        if parser.get_default("out_kind") is not None:
            assert name in with_o, name


def test_old_long_spellings_still_work(tmp_path: Path) -> None:
    parser = build_parser()
    got = parser.parse_args(["chakra", "jsonize", "x.et", "--output", "a.json"])
    assert got.out == "a.json"
    got = parser.parse_args(["chakra", "generate", "--collective", "all_reduce",
                             "--num-npus", "2", "--output-dir", "d"])  # fmt: skip
    assert got.out == "d"


def _argv(verb: str, out: str, missing: str) -> list[str]:
    """The verb with an input that does not exist (so any work would fail on it first)."""
    return {
        "collect": ["collect", "-o", out, "--", sys.executable, "-c", f"open({missing!r}, 'w')"],
        "demo": ["demo", "-o", out],
        "report": ["report", missing, "-o", out],
        "replay": ["replay", missing, "-o", out],
        "analyze": ["analyze", missing, "-o", out],
        "diff": ["diff", missing, missing, "-o", out],
        "estimate": ["estimate", missing, "-o", out, "--set", "dp=2"],
        "advise": ["advise", missing, "-o", out],
        "link": ["link", missing, missing, "-o", out],
        "convert": ["convert", missing, "-o", out],
        "chakra jsonize": ["chakra", "jsonize", missing, "-o", out],
        "chakra visualize": ["chakra", "visualize", missing, "-o", out],
        "chakra timeline": ["chakra", "timeline", missing, "-o", out],
        "chakra text2et": ["chakra", "text2et", missing, "-o", out, "--num-npus", "2"],
        "chakra generate": ["chakra", "generate", "--collective", "all_reduce",
                            "--num-npus", "2", "-o", out],
        "chakra obfuscate": ["chakra", "obfuscate", missing, "-o", out],
        "synth fit": ["synth", "fit", missing, "-o", out],
        "synth sample": ["synth", "sample", missing, "-o", out],
        "synth report": ["synth", "report", missing, missing, "-o", out],
        "bench": ["bench", missing, "-o", out],
    }[verb]  # fmt: skip


@pytest.mark.parametrize("verb", sorted(EXPECTED))
def test_o_under_a_file_is_refused_before_the_work(
    verb: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    missing = str(tmp_path / "no_such_input")
    out = str(blocker / "out")
    assert main(_argv(verb, out, missing)) == 1
    err = capsys.readouterr().err
    assert err.startswith("lumos: error: ") and len(err.strip().splitlines()) == 1, err
    assert out in err and "is not a directory" in err, err
    assert "no_such_input" not in err  # the output was checked first
    assert not Path(missing).exists()  # collect did not run its command


@pytest.mark.parametrize("verb", sorted(EXPECTED))
def test_o_of_the_wrong_kind_is_refused(
    verb: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kind = EXPECTED[verb]
    if kind == "dir":
        out = tmp_path / "a_file"
        out.write_text("x")
        expect = "exists and is not a directory"
    else:
        out = tmp_path / "a_dir"
        out.mkdir()
        expect = "is a directory, expected a file name"
    assert main(_argv(verb, str(out), str(tmp_path / "no_such_input"))) == 1
    err = capsys.readouterr().err
    assert expect in err and len(err.strip().splitlines()) == 1, err
