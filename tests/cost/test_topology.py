"""Topologies: presets, TOML files a user writes, and errors naming the file and key."""

from __future__ import annotations

import pytest

from lumos.cost.topology import PRESETS, Topology, read_topology, resolve_topology
from lumos.errors import ConfigError

GOOD = """
name = "lab"
gpus_per_node = 4
intra_bw = "100GB/s"
intra_latency = "2us"
inter_bw = "4x200Gb/s"
inter_latency_ns = 6000
"""


def test_presets_are_valid_and_named():
    assert set(PRESETS) == {"dgx-a100", "dgx-h100", "pcie-8gpu"}
    for name, t in PRESETS.items():
        assert t.name == name and t.gpus_per_node == 8
    assert not PRESETS["pcie-8gpu"].multi_node
    assert PRESETS["dgx-h100"].intra_bw_bytes_per_s > PRESETS["dgx-a100"].intra_bw_bytes_per_s


def test_read_good_file(tmp_path):
    path = tmp_path / "lab.toml"
    path.write_text(GOOD)
    t = read_topology(path)
    assert t == Topology(name="lab", gpus_per_node=4, intra_bw_bytes_per_s=100e9,
                         intra_latency_ns=2000, inter_bw_bytes_per_s=100e9,
                         inter_latency_ns=6000, nics_per_node=4)  # fmt: skip
    assert resolve_topology(str(path)) == t
    assert resolve_topology("dgx-a100") is PRESETS["dgx-a100"]


@pytest.mark.parametrize(("text", "words"), [
    ("gpus_per_node = 8\nintra_bw = 'fast'\nintra_latency = '1us'", ["intra_bw", "fast"]),
    ("gpus_per_node = 8\nintra_bw = '1GB/s'", ["intra_latency"]),
    ("gpus_per_node = 8\nintra_bw = '1GB/s'\nintra_latency = 1\nwarp = 9", ["warp"]),
    ("gpus_per_node = 0\nintra_bw = '1GB/s'\nintra_latency = 1", ["gpus_per_node"]),
    ("gpus_per_node = 'eight'\nintra_bw = '1GB/s'\nintra_latency = 1", ["gpus_per_node"]),
    ("gpus_per_node = [", ["not valid TOML"]),
])  # fmt: skip
def test_bad_files_name_file_and_key(tmp_path, text, words):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        read_topology(path)
    msg = str(err.value)
    assert str(path) in msg and "\n" not in msg
    for w in words:
        assert w in msg


def test_missing_file_and_unknown_preset(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        read_topology(tmp_path / "none.toml")
    with pytest.raises(ConfigError, match="dgx-a100"):
        resolve_topology("dgx-z900")


def test_dataclass_validates():
    with pytest.raises(ConfigError):
        Topology(gpus_per_node=8, intra_bw_bytes_per_s=-1.0, intra_latency_ns=0)
    with pytest.raises(ConfigError, match="nics_per_node"):
        Topology(gpus_per_node=8, intra_bw_bytes_per_s=1e9, intra_latency_ns=0,
                 inter_bw_bytes_per_s=1e9)  # fmt: skip


# --- boundaries and exact messages (each kills a mutant the tests above let live) ----------------
def _topo(**kw):
    base = {"gpus_per_node": 1, "intra_bw_bytes_per_s": 0.5, "intra_latency_ns": 0}
    return Topology(**(base | kw))


def test_the_smallest_valid_topology():
    """One GPU per node, half a byte per second, no latency, no network: all valid."""
    t = _topo()
    assert (t.gpus_per_node, t.intra_bw_bytes_per_s, t.multi_node) == (1, 0.5, False)
    assert [t.nodes_for(r) for r in (0, 1, 2, 3)] == [1, 1, 2, 3]
    net = _topo(inter_bw_bytes_per_s=0.5, nics_per_node=1, inter_latency_ns=0)
    assert net.multi_node and net.inter_bw_bytes_per_s == 0.5


@pytest.mark.parametrize(("kw", "message"), [
    ({"gpus_per_node": 0}, "topology custom: gpus_per_node must be a whole number >= 1"),
    ({"gpus_per_node": 2.0}, "topology custom: gpus_per_node must be a whole number >= 1"),
    ({"intra_bw_bytes_per_s": 0.0}, "topology custom: intra_bw_bytes_per_s must be positive"),
    ({"intra_bw_bytes_per_s": float("inf")},
     "topology custom: intra_bw_bytes_per_s must be positive"),
    ({"inter_bw_bytes_per_s": -1.0}, "topology custom: inter_bw_bytes_per_s must be >= 0"),
    ({"inter_bw_bytes_per_s": float("inf"), "nics_per_node": 1},
     "topology custom: inter_bw_bytes_per_s must be >= 0"),
    ({"intra_latency_ns": -1}, "topology custom: intra_latency_ns must be a whole number >= 0"),
    ({"inter_latency_ns": 1.5}, "topology custom: inter_latency_ns must be a whole number >= 0"),
    ({"nics_per_node": -1}, "topology custom: nics_per_node must be a whole number >= 0"),
    ({"inter_bw_bytes_per_s": 0.5, "name": "x"},
     "topology x: an inter-node network needs nics_per_node"),
])  # fmt: skip
def test_each_invalid_field_is_named_exactly(kw, message):
    with pytest.raises(ConfigError) as err:
        _topo(**kw)
    assert str(err.value) == message


def test_an_unknown_preset_lists_the_presets():
    with pytest.raises(ConfigError) as err:
        resolve_topology("dgx-z900")
    assert str(err.value) == (
        "unknown topology 'dgx-z900'; presets: dgx-a100, dgx-h100, pcie-8gpu (or a TOML file)"
    )


def _read(tmp_path, text):
    path = tmp_path / "t.toml"
    path.write_text(text)
    return path, read_topology(path)


MINIMAL = "gpus_per_node = 2\nintra_bw = 8\nintra_latency = 3\n"


@pytest.mark.parametrize(("extra", "inter_bw", "nics"), [
    ("", 0.0, 0), ("inter_bw = 0\n", 0.0, 0), ("inter_bw = 0.0\n", 0.0, 0),
    ("inter_bw = '0'\n", 0.0, 0), ("inter_bw = 'none'\n", 0.0, 0),
    ("inter_bw = 1\n", 1.0, 2), ("inter_bw = 0.5\n", 0.5, 2),
    ("inter_bw = '3x8b/s'\n", 3.0, 2), ("inter_bw = 16\nnics_per_node = 1\n", 16.0, 1),
])  # fmt: skip
def test_no_network_is_written_as_zero_or_none_and_nics_default_to_gpus(
    tmp_path, extra, inter_bw, nics
):
    """``inter_bw`` 0, 0.0, "0" or "none" is no network; a network without ``nics_per_node``
    has one NIC per GPU; "NxRATE" is N NICs of RATE; numbers are bytes/s and ns."""
    _, t = _read(tmp_path, MINIMAL + extra)
    assert t == Topology(name="t", gpus_per_node=2, intra_bw_bytes_per_s=8.0, intra_latency_ns=3,
                         inter_bw_bytes_per_s=inter_bw, nics_per_node=nics)  # fmt: skip


def test_a_latency_written_as_a_whole_float_is_ns(tmp_path):
    _, t = _read(tmp_path, "gpus_per_node = 2\nintra_bw = 8\nintra_latency = 3.0\n")
    assert t.intra_latency_ns == 3


@pytest.mark.parametrize(("text", "message"), [
    ("gpus_per_node = true\nintra_bw = 8\nintra_latency = 3", "key 'gpus_per_node': True is not a whole number"),
    ("gpus_per_node = 2\nintra_bw = 8\nintra_latency = 3\nname = 5", "key 'name': 5 is not a string"),
    ("gpus_per_node = 2\nintra_bw = 8", "missing key 'intra_latency'"),
    ("intra_bw = 8\nintra_latency = 3", "missing key 'gpus_per_node'"),
    ("gpus_per_node = 2\nintra_latency = 3", "missing key 'intra_bw'"),
    ("gpus_per_node = 2\nintra_bw = 8\nintra_latency = 3\nwarp = 1",
     "unknown key 'warp' (known: intra_bw, intra_bw_bytes_per_s, intra_latency, intra_latency_ns, "
     "inter_bw, inter_bw_bytes_per_s, inter_latency, inter_latency_ns, gpus_per_node, "
     "nics_per_node, name)"),
])  # fmt: skip
def test_file_errors_are_exact(tmp_path, text, message):
    path = tmp_path / "t.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        read_topology(path)
    assert str(err.value) == f"{path}: {message}"


def test_an_unreadable_file_says_why(tmp_path):
    with pytest.raises(ConfigError) as err:
        read_topology(tmp_path / "none.toml")
    assert (
        str(err.value)
        == f"{tmp_path / 'none.toml'}: cannot read topology file: No such file or directory"
    )


def test_resolve_reads_any_existing_path_and_any_toml_name(tmp_path):
    """A name that is no preset is a file when it exists (any extension) or ends in ``.toml``
    (a missing one says it cannot be read, not that the preset is unknown)."""
    path = tmp_path / "lab.cfg"
    path.write_text(MINIMAL)
    assert resolve_topology(str(path)).gpus_per_node == 2
    with pytest.raises(ConfigError, match="cannot read topology file"):
        resolve_topology(str(tmp_path / "gone.toml"))
