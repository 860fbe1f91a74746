"""Alpha-beta formulas against values derived by hand (arithmetic in the comments).

Link: 50e9 bytes/s, 500 ns per step; p = 8 ranks; n = 1 MiB = 1,048,576 bytes.
"""

from __future__ import annotations

import pytest

from lumos.cost.collectives import Link, collective_time, comm_kind
from lumos.cost.topology import preset
from lumos.errors import ConfigError
from lumos.graph.kinds import CommType

LINK = Link(bw_bytes_per_s=50e9, latency_ns=500)
N = 1 << 20


@pytest.mark.parametrize(("kind", "algo", "expected"), [
    # ring: 2(p-1) = 14 steps x 500 = 7000; 2*7/8 * 1048576 / 50 B/ns = 36700.16 -> 36700
    ("all_reduce", "ring", 7000 + 36700),
    # tree: 2*log2(8) = 6 steps x 500 = 3000; 2 * 1048576 / 50 = 41943.04 -> 41943
    ("all_reduce", "tree", 3000 + 41943),
    # halving-doubling: 6 steps = 3000; 36700 as ring
    ("all_reduce", "halving_doubling", 3000 + 36700),
    # all_gather ring: 7 steps = 3500; 7/8 * 1048576 / 50 = 18350.08 -> 18350
    ("all_gather", "ring", 3500 + 18350),
    ("reduce_scatter", "ring", 3500 + 18350),
    # halving-doubling: log2(8) = 3 steps = 1500
    ("all_gather", "halving_doubling", 1500 + 18350),
    # all_to_all direct: one concurrent step = 500; 7/8 of n leaves the rank = 18350
    ("all_to_all", "direct", 500 + 18350),
    # all_to_all ring: 7 steps = 3500; relayed (p-1)/2 * n / 50 = 3.5 * 20971.52 = 73400.32
    ("all_to_all", "ring", 3500 + 73400),
    # broadcast chain: 7 steps = 3500; pipelined n / 50 = 20971.52 -> 20972
    ("broadcast", "ring", 3500 + 20972),
    ("reduce", "tree", 1500 + 20972),
    ("send", "auto", 500 + 20972),
    # barrier: log2(8) = 3 steps, no bytes
    ("barrier", "auto", 1500),
])  # fmt: skip
def test_flat_formulas(kind, algo, expected):
    assert collective_time(kind, N, 8, LINK, algorithm=algo).time_ns == expected


def test_terms_sum_to_time_and_protocol_chunks_reduction():
    t = collective_time("all_reduce", N, 8, LINK, algorithm="ring", protocol="ll",
                        chunks=4, reduce_bw_bytes_per_s=100e9)  # fmt: skip
    # (14 + 4 - 1) x 500 = 8500; LL halves bandwidth: 1835008 / 25 = 73400.32;
    # reduction 7/8 n / 100 B/ns = 9175.04
    assert dict(t.terms) == {"latency_ns": 8500, "bandwidth_ns": 73400, "reduction_ns": 9175}
    assert t.time_ns == sum(t.terms.values())


def test_auto_picks_tree_for_small_all_reduce_and_ring_for_large():
    assert collective_time("all_reduce", 64 << 10, 8, LINK).algorithm == "tree"
    assert collective_time("all_reduce", 64 << 20, 8, LINK).algorithm == "ring"
    assert collective_time("all_reduce", 64 << 10, 2, LINK).algorithm == "ring"
    assert collective_time("all_to_all", N, 8, LINK).algorithm == "direct"


def test_hierarchical_on_two_dgx_a100():
    # 16 ranks = 2 nodes x 8; n = 16 MiB = 16,777,216
    # intra: 2*7 steps x 1000 = 14000; 2*7/8 * n / 240 B/ns = 122333.87 -> 122334
    # inter: 2*1 steps x 5000 = 10000; 2*1/2 * n / 184 B/ns = 91180.52 -> 91181
    t = collective_time("all_reduce", 16 << 20, 16, preset("dgx-a100"), algorithm="hierarchical")
    assert dict(t.terms) == {"intra_latency_ns": 14000, "intra_bandwidth_ns": 122334,
                             "inter_latency_ns": 10000, "inter_bandwidth_ns": 91181,
                             "reduction_ns": 0}  # fmt: skip


def test_topology_link_choice():
    a100 = preset("dgx-a100")
    inside = collective_time("all_gather", N, 8, a100, algorithm="ring")
    # 7 x 1000 + 7/8 n / 240 = 3822.93 -> 3823
    assert inside.time_ns == 7000 + 3823
    across = collective_time("all_gather", N, 16, a100, algorithm="ring")
    # 15 x 5000 + 15/16 n / 184 = 5342.6 -> 5343 (the NICs are the bottleneck)
    assert across.time_ns == 75000 + 5343


def test_single_rank_is_free_and_bad_input_is_config_error():
    assert collective_time("all_reduce", N, 1, LINK).time_ns == 0
    with pytest.raises(ConfigError, match="does not apply"):
        collective_time("all_gather", N, 8, LINK, algorithm="tree")
    with pytest.raises(ConfigError, match="topology"):
        collective_time("all_reduce", N, 8, LINK, algorithm="hierarchical")
    with pytest.raises(ConfigError, match="no inter-node"):
        collective_time("all_reduce", N, 16, preset("pcie-8gpu"))
    with pytest.raises(ConfigError, match="unknown collective"):
        comm_kind("allsum")
    assert comm_kind("AllReduce") == comm_kind("all-reduce") == CommType.ALL_REDUCE
