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
