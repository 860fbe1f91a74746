"""Cluster topologies for the communication model: a node of GPUs and the network between nodes.

A :class:`Topology` is two links: the one between GPUs of a node (NVLink, PCIe) and the one that
leaves a node (all its NICs together). Bandwidths are *effective* (what NCCL reaches, as reported
by nccl-tests "bus bandwidth"), not the datasheet peak; latencies are per step of a collective
algorithm (software and hardware together), not a wire latency.

Presets (public figures; the effective numbers are assumptions, not measurements of ours):

==========  ====  ==========================================  =====================================
name        GPUs  intra-node                                  inter-node (per node, all NICs)
==========  ====  ==========================================  =====================================
dgx-a100    8     NVLink3/NVSwitch: 300 GB/s per direction      8 x 200 Gb/s HDR InfiniBand = 200 GB/s
                  per GPU peak; 240 GB/s effective (nccl-tests  peak; 184 GB/s effective (92 % of line
                  all_reduce busbw ~230-240 GB/s); 1 us/step    rate); 5 us/step
dgx-h100    8     NVLink4/NVSwitch: 450 GB/s per direction      8 x 400 Gb/s NDR InfiniBand = 400 GB/s
                  per GPU peak; 450 GB/s effective (nccl-tests  peak; 368 GB/s effective (92 %);
                  busbw with NVLink SHARP reaches it); 1 us     5 us/step
pcie-8gpu   8     PCIe Gen4 x16: 32 GB/s per direction peak,    none (a single box)
                  24 GB/s effective; 2 us/step
==========  ====  ==========================================  =====================================

A user's own topology is a TOML file read by :func:`read_topology`::

    name = "my-cluster"
    gpus_per_node = 8
    intra_bw = "240GB/s"        # or intra_bw_bytes_per_s = 240e9
    intra_latency = "1us"       # or intra_latency_ns = 1000
    inter_bw = "8x200Gb/s"      # per node: NICs x rate, or a total such as "184GB/s"
    inter_latency = "5us"
    nics_per_node = 8

>>> t = preset("dgx-a100")
>>> t.gpus_per_node, t.intra_bw_bytes_per_s, t.inter_bw_bytes_per_s
(8, 240000000000.0, 184000000000.0)
>>> t.nodes_for(16), t.nodes_for(8), t.nodes_for(4)
(2, 1, 1)
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lumos.cost.units import parse_bandwidth, parse_duration
from lumos.errors import ConfigError

__all__ = ["PRESETS", "Topology", "preset", "read_topology", "resolve_topology"]


@dataclass(frozen=True, kw_only=True)
class Topology:
    """GPUs per node, the intra-node link, the inter-node network (per node), and a name.

    ``inter_bw_bytes_per_s`` is the node's whole NIC bandwidth (``nics_per_node`` NICs
    together); 0 means there is no inter-node network (a single box): a group larger than
    ``gpus_per_node`` is then an error when it is modelled.
    """

    gpus_per_node: int
    intra_bw_bytes_per_s: float
    intra_latency_ns: int
    inter_bw_bytes_per_s: float = 0.0
    inter_latency_ns: int = 0
    nics_per_node: int = 0
    name: str = "custom"

    def __post_init__(self) -> None:
        if not isinstance(self.gpus_per_node, int) or self.gpus_per_node < 1:
            raise ConfigError(f"topology {self.name}: gpus_per_node must be a whole number >= 1")
        if not (0 < self.intra_bw_bytes_per_s < math.inf):
            raise ConfigError(f"topology {self.name}: intra_bw_bytes_per_s must be positive")
        if not (0 <= self.inter_bw_bytes_per_s < math.inf):
            raise ConfigError(f"topology {self.name}: inter_bw_bytes_per_s must be >= 0")
        for key in ("intra_latency_ns", "inter_latency_ns", "nics_per_node"):
            value = getattr(self, key)
            if not isinstance(value, int) or value < 0:
                raise ConfigError(f"topology {self.name}: {key} must be a whole number >= 0")
        if self.inter_bw_bytes_per_s > 0 and self.nics_per_node == 0:
            raise ConfigError(f"topology {self.name}: an inter-node network needs nics_per_node")

    @property
    def multi_node(self) -> bool:
        """Whether nodes are connected (a group may span several nodes)."""
        return self.inter_bw_bytes_per_s > 0

    def nodes_for(self, ranks: int) -> int:
        """Nodes a group of ``ranks`` GPUs spans, packed ``gpus_per_node`` to a node."""
        return max(1, math.ceil(ranks / self.gpus_per_node))


PRESETS: dict[str, Topology] = {
    "dgx-a100": Topology(
        name="dgx-a100", gpus_per_node=8, intra_bw_bytes_per_s=240e9, intra_latency_ns=1000,
        inter_bw_bytes_per_s=8 * 23e9, inter_latency_ns=5000, nics_per_node=8,
    ),
    "dgx-h100": Topology(
        name="dgx-h100", gpus_per_node=8, intra_bw_bytes_per_s=450e9, intra_latency_ns=1000,
        inter_bw_bytes_per_s=8 * 46e9, inter_latency_ns=5000, nics_per_node=8,
    ),
    "pcie-8gpu": Topology(
        name="pcie-8gpu", gpus_per_node=8, intra_bw_bytes_per_s=24e9, intra_latency_ns=2000,
    ),
}  # fmt: skip


def preset(name: str) -> Topology:
    """The preset called ``name``; :class:`ConfigError` lists the known ones otherwise."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(
            f"unknown topology {name!r}; presets: {', '.join(PRESETS)} (or a TOML file)"
        ) from None


def resolve_topology(name_or_path: str) -> Topology:
    """A preset name, or else the path of a TOML topology file (the CLI's ``--topology``)."""
    if name_or_path in PRESETS:
        return PRESETS[name_or_path]
    if os.path.exists(name_or_path) or name_or_path.endswith(".toml"):
        return read_topology(name_or_path)
    return preset(name_or_path)


# key in the file -> (field, parser); a field may be written in its unit or in human units
_KEYS: dict[str, tuple[str, str]] = {
    "intra_bw": ("intra_bw_bytes_per_s", "bw"),
    "intra_bw_bytes_per_s": ("intra_bw_bytes_per_s", "bw"),
    "intra_latency": ("intra_latency_ns", "ns"),
    "intra_latency_ns": ("intra_latency_ns", "ns"),
    "inter_bw": ("inter_bw_bytes_per_s", "bw0"),
    "inter_bw_bytes_per_s": ("inter_bw_bytes_per_s", "bw0"),
    "inter_latency": ("inter_latency_ns", "ns"),
    "inter_latency_ns": ("inter_latency_ns", "ns"),
    "gpus_per_node": ("gpus_per_node", "int"),
    "nics_per_node": ("nics_per_node", "int"),
    "name": ("name", "str"),
}


_COUNT_X_RATE = re.compile(r"^\s*(\d+)\s*[xX]\s*(\S.*)$")


def _bandwidth_with_count(value: Any) -> float:
    """``"8x200Gb/s"`` (NICs x rate) or a plain bandwidth."""
    m = _COUNT_X_RATE.match(value) if isinstance(value, str) else None
    if m is not None:
        return int(m[1]) * parse_bandwidth(m[2])
    return parse_bandwidth(value)


def _convert(kind: str, value: Any) -> Any:
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{value!r} is not a whole number")
        return value
    if kind == "str":
        if not isinstance(value, str):
            raise ConfigError(f"{value!r} is not a string")
        return value
    if kind == "ns":
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        return parse_duration(value)
    if kind == "bw0" and value in (0, 0.0, "0", "none"):
        return 0.0
    return _bandwidth_with_count(value)


def read_topology(path: str | os.PathLike[str]) -> Topology:
    """Read a TOML topology file (see the module docstring for its keys).

    Raises :class:`ConfigError` naming the file, and the key when one is at fault: unreadable
    or malformed TOML, an unknown key, a missing required key, a value in the wrong unit.
    """
    where = str(path)
    try:
        with Path(path).open("rb") as f:
            doc = tomllib.load(f)
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read topology file: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where}: not valid TOML: {exc}") from None
    fields: dict[str, Any] = {"name": Path(path).stem}
    for key, value in doc.items():
        if key not in _KEYS:
            raise ConfigError(f"{where}: unknown key {key!r} (known: {', '.join(_KEYS)})")
        field, kind = _KEYS[key]
        try:
            fields[field] = _convert(kind, value)
        except ConfigError as exc:
            raise ConfigError(f"{where}: key {key!r}: {exc}") from None
    for required, key in (("gpus_per_node", "gpus_per_node"),
                          ("intra_bw_bytes_per_s", "intra_bw"),
                          ("intra_latency_ns", "intra_latency")):  # fmt: skip
        if required not in fields:
            raise ConfigError(f"{where}: missing key {key!r}")
    if fields.get("inter_bw_bytes_per_s", 0) > 0 and "nics_per_node" not in fields:
        fields["nics_per_node"] = fields["gpus_per_node"]
    try:
        return Topology(**fields)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
