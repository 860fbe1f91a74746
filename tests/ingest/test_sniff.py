"""sniff_kind: a key counts where it is a key (quoted, then a colon), wherever in the head."""

from __future__ import annotations

import pytest

from lumos.ingest.detect import sniff_kind


@pytest.mark.parametrize(
    ("head", "kind"),
    [
        (b'{"traceEvents": []}', "kineto"),
        (b'{"a": "traceEvents", "traceEvents"\n\t : []}', "kineto"),
        (b'{"x": 1, "nodes": []}', "pytorch_et"),
        (b'{"schema" :"1.0.1"}', "pytorch_et"),
        (b'{"note": "traceEvents nodes schema", "other": "traceEvents"}', None),
        (b'  [{"ph": "X"}]', "kineto"),
        (b'{"nodes": [], "traceEvents": []}', "kineto"),
    ],
)
def test_sniff_kind(head: bytes, kind: str | None) -> None:
    assert sniff_kind(head) == kind


@pytest.mark.parametrize("extra", range(0, 140))
def test_a_chakra_file_is_chakra_whatever_its_metadata_length(extra: int, tmp_path) -> None:
    """The first byte is the GlobalMetadata record's length: 91 is "[" and 123 is "{", and
    the next byte (field 1's tag, 0x0a) is a newline, which once made such files JSON."""
    from lumos.chakra import NodeType, attr
    from lumos.chakra.builder import ChakraTraceBuilder
    from lumos.chakra.io import write_chakra

    b = ChakraTraceBuilder(version="0.0.4", metadata_attrs=[attr("pad", "x" * extra)])
    b.add_node(1, "n", NodeType.COMP_NODE, duration_micros=1)
    path = write_chakra(b.build(), tmp_path / "t.et")[0]
    assert sniff_kind(path.read_bytes()) == "chakra"


@pytest.mark.parametrize("text", [b"[\n\x05", b"{\n\x05", b"{\n 0", b"[1, 2]", b'{x"'])
def test_brackets_that_open_no_object_are_not_json(text: bytes) -> None:
    assert sniff_kind(text) != "kineto" and sniff_kind(text) != "pytorch_et"


def test_a_folder_of_astra_sim_ready_ets_replays_as_astra_sim_does(tmp_path, capsys):
    """What ``lumos convert --target astra-sim`` writes beside the ETs (PREFIX.convert.json,
    whose "nodes" counts once read as a PyTorch ET's key) is no trace: the folder holds Chakra
    ETs and ASTRA-sim's configs only, so replay takes ASTRA-sim's semantics."""
    from tests.conftest import DATA

    from lumos.cli.main import main
    from lumos.ingest.detect import expand_paths

    assert main(["convert", str(DATA / "pipeline_4_stages"), "-o", str(tmp_path / "et" / "pp"),
                 "--target", "astra-sim"]) == 0  # fmt: skip
    assert sorted(r.kind for r in expand_paths([tmp_path / "et"])) == ["chakra"] * 4
    capsys.readouterr()
    assert main(["replay", str(tmp_path / "et"), "-o", str(tmp_path / "r")]) == 0
    assert "replaying them as ASTRA-sim does" in capsys.readouterr().out
