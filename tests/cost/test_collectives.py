"""Alpha-beta formulas against values derived by hand (arithmetic in the comments).

Link: 50e9 bytes/s, 500 ns per step; p = 8 ranks; n = 1 MiB = 1,048,576 bytes.
"""

from __future__ import annotations

import pytest

from lumos.cost.collectives import Link, collective_time, comm_kind
from lumos.cost.topology import Topology, preset
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
    # gather, scatter direct: the root exchanges with p-1 = 7 peers in turn = 3500; 7/8 n = 18350
    ("gather", "direct", 3500 + 18350),
    ("scatter", "direct", 3500 + 18350),
    ("gather", "ring", 3500 + 18350),
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


def test_only_reducing_collectives_have_a_reduction_term():
    """With ``reduce_bw`` = 100 B/ns: a reduce-scatter reduces 7/8 n = 917,504 bytes -> 9175.04
    ns; an all-gather reduces nothing -> 0 (bandwidth 18,350 and 7 x 500 steps either way)."""
    rs = collective_time(
        "reduce_scatter", N, 8, LINK, algorithm="ring", reduce_bw_bytes_per_s=100e9
    )
    ag = collective_time("all_gather", N, 8, LINK, algorithm="ring", reduce_bw_bytes_per_s=100e9)
    assert dict(rs.terms) == {"latency_ns": 3500, "bandwidth_ns": 18350, "reduction_ns": 9175}
    assert dict(ag.terms) == {"latency_ns": 3500, "bandwidth_ns": 18350, "reduction_ns": 0}


@pytest.mark.parametrize("algo", ["ring", "tree"])
def test_a_reduce_reduces_the_whole_tensor_and_a_broadcast_nothing(algo):
    """With ``reduce_bw`` = 100 B/ns over 8 ranks: a reduce folds every rank's n = 1 MiB into the
    root, n / 100 = 10,485.76 -> 10,486 ns; a broadcast of the same tensor reduces nothing.
    Both move n pipelined, n / 50 = 20,971.52 -> 20,972 ns, in 7 steps (chain) or log2 8 = 3
    (tree) of 500 ns."""
    steps = {"ring": 7, "tree": 3}[algo]
    red = collective_time("reduce", N, 8, LINK, algorithm=algo, reduce_bw_bytes_per_s=100e9)
    bc = collective_time("broadcast", N, 8, LINK, algorithm=algo, reduce_bw_bytes_per_s=100e9)
    assert dict(red.terms) == {"latency_ns": steps * 500, "bandwidth_ns": 20972,
                               "reduction_ns": 10486}  # fmt: skip
    assert dict(bc.terms) == {"latency_ns": steps * 500, "bandwidth_ns": 20972, "reduction_ns": 0}


def test_hierarchical_within_one_node_has_no_inter_node_part():
    """A hierarchical collective whose group fits one node (8 ranks of a DGX A100, n = 16 MiB)
    is its intra-node part alone: 2 x 7 x 1000 = 14,000 ns of steps and 2 x 7/8 n / 240 B/ns =
    122,333.87 -> 122,334 ns (as ``test_hierarchical_on_two_dgx_a100``); no inter-node step,
    so not even the extra pipeline chunk (chunks = 2) costs inter-node latency.

    On a box with no inter-node network (pcie-8gpu: 24 B/ns, 2000 ns, inter bandwidth 0) a
    hierarchical all_to_all of 8 ranks is its intra part: 7/8 n / 24 = 38,229.33 -> 38,229 ns
    (n = 1 MiB), at the intra latency 2000; nothing crosses the absent NICs."""
    t = collective_time("all_reduce", 16 << 20, 8, preset("dgx-a100"), algorithm="hierarchical",
                        chunks=2)  # fmt: skip
    assert dict(t.terms) == {"intra_latency_ns": 14000, "intra_bandwidth_ns": 122_334,
                             "inter_latency_ns": 0, "inter_bandwidth_ns": 0,
                             "reduction_ns": 0}  # fmt: skip
    t = collective_time("all_to_all", N, 8, preset("pcie-8gpu"), algorithm="hierarchical")
    assert dict(t.terms) == {"latency_ns": 2000, "bandwidth_ns": 38_229, "reduction_ns": 0}


def test_hierarchical_reduction_term():
    """16 ranks on two DGX A100, n = 16 MiB, ``reduce_bw`` = 100 B/ns: an all-reduce or a
    reduce-scatter reduces (p-1)/p n = 15/16 x 16,777,216 = 15,728,640 bytes -> 157,286.4 ns;
    an all-gather none. The other terms are those of ``test_hierarchical_on_two_dgx_a100``
    (all-gather: half of them, 7 x 1000, 7/8 n / 240 = 61,166.93, 1 x 5000, 1/2 n / 184 =
    45,590.26)."""
    a100, n = preset("dgx-a100"), 16 << 20
    terms = {}
    for kind in ("all_reduce", "reduce_scatter", "all_gather"):
        t = collective_time(kind, n, 16, a100, algorithm="hierarchical", reduce_bw_bytes_per_s=1e11)
        terms[kind] = dict(t.terms)
    assert terms["all_reduce"]["reduction_ns"] == 157_286
    assert terms["reduce_scatter"] == {"intra_latency_ns": 7000, "intra_bandwidth_ns": 61167,
                                       "inter_latency_ns": 5000, "inter_bandwidth_ns": 45590,
                                       "reduction_ns": 157_286}  # fmt: skip
    assert terms["all_gather"] == {**terms["reduce_scatter"], "reduction_ns": 0}


def test_all_to_all_across_nodes_is_bound_by_the_slower_of_nvlink_and_the_nics():
    """Direct all_to_all over several nodes: one step at the larger latency, bandwidth the
    larger of the intra part ``(g-1)/p n / B_i`` and the NIC part ``g (p-g)/p n / B_o``.

    Two DGX A100 (g = 8 of p = 16), n = 16 MiB: intra 7/16 n / 240 B/ns = 30,583.5 ns, NICs
    4 n / 184 B/ns = 364,722.09 ns -> 364,722 (the NICs); latency max(1000, 5000) = 5000.
    Two nodes of 2 GPUs on a slow 10 B/ns intra link and 100 B/ns of NICs (p = 4, g = 2),
    n = 4,000,000: intra 1/4 n / 10 = 100,000 ns, NICs n / 100 = 40,000 ns -> 100,000 (the
    intra link); latency max(300, 2000) = 2000."""
    t = collective_time("all_to_all", 16 << 20, 16, preset("dgx-a100"))
    assert (t.algorithm, dict(t.terms)) == (
        "direct", {"latency_ns": 5000, "bandwidth_ns": 364_722, "reduction_ns": 0})  # fmt: skip
    slow_inside = Topology(name="slow", gpus_per_node=2, intra_bw_bytes_per_s=10e9,
                           intra_latency_ns=300, inter_bw_bytes_per_s=100e9,
                           inter_latency_ns=2000, nics_per_node=1)  # fmt: skip
    t = collective_time("all_to_all", 4_000_000, 4, slow_inside, algorithm="direct")
    assert dict(t.terms) == {"latency_ns": 2000, "bandwidth_ns": 100_000, "reduction_ns": 0}


def test_a_single_rank_states_its_group_and_a_zero_latency_link_is_valid():
    """One rank moves nothing but its record still says one rank; a link with no latency is
    valid (its steps cost 0: the ring all-reduce of the module docstring less its 7000 ns)."""
    assert collective_time("all_reduce", N, 1, LINK, algorithm="ring").to_dict() == {
        "kind": "all_reduce", "algorithm": "ring", "size_bytes": N, "ranks": 1, "time_ns": 0,
        "terms": {"latency_ns": 0, "bandwidth_ns": 0, "reduction_ns": 0}}  # fmt: skip
    free = Link(bw_bytes_per_s=50e9, latency_ns=0)
    assert dict(collective_time("all_reduce", N, 8, free, algorithm="ring").terms) == {
        "latency_ns": 0, "bandwidth_ns": 36700, "reduction_ns": 0}  # fmt: skip


def test_bad_arguments_are_named_exactly():
    """Each invalid argument raises one ConfigError whose message names it and its value."""
    cases = [
        (lambda: Link(bw_bytes_per_s=50e9, latency_ns=-1), "latency must be >= 0, got -1"),
        (lambda: Link(bw_bytes_per_s=0.0, latency_ns=0), "bandwidth must be positive, got 0.0"),
        (lambda: collective_time("all_reduce", -1, 8, LINK), "size must be >= 0 bytes, got -1"),
        (lambda: collective_time("all_reduce", N, 0, LINK), "ranks must be >= 1, got 0"),
        (lambda: collective_time("all_reduce", N, 8, LINK, chunks=0), "chunks must be >= 1, got 0"),
    ]
    for call, message in cases:
        with pytest.raises(ConfigError) as err:
            call()
        assert str(err.value) == message


# reduce_bw 100 bytes/ns; 1 MiB over 8 ranks on LINK (50 bytes/ns, 500 ns per step):
# (p-1)/p n = 917,504 bytes, so 7/8 n / 50 = 18,350 ns and 7/8 n / 100 = 9,175 ns
@pytest.mark.parametrize(("kind", "algo", "ranks", "terms"), [
    ("all_reduce", "direct", 8, (2 * 500, 36_700, 9_175)),  # 2 steps, 2 x 7/8 n / 50
    ("all_reduce", "tree", 8, (6 * 500, 41_943, 10_486)),  # 2 log2 8 steps, 2n / 50, n / 100
    ("all_gather", "direct", 8, (500, 18_350, 0)),
    ("reduce_scatter", "direct", 8, (500, 18_350, 9_175)),
    ("all_to_all", "direct", 8, (500, 18_350, 0)),
    ("all_to_all", "ring", 8, (7 * 500, 73_400, 0)),  # relayed: 7/2 n / 50
    ("gather", "direct", 8, (7 * 500, 18_350, 0)),
    ("gather", "ring", 8, (7 * 500, 18_350, 0)),
    ("scatter", "ring", 8, (7 * 500, 18_350, 0)),
    ("send", "auto", 1, (500, 20_972, 0)),  # a send is between 2 ranks, whatever it says: n / 50
    ("recv", "direct", 2, (500, 20_972, 0)),
    ("barrier", "auto", 8, (3 * 500, 0, 0)),  # log2 8 steps, nothing sent
])  # fmt: skip
def test_every_algorithm_term_by_term_with_a_reduction_bandwidth(kind, algo, ranks, terms):
    """The module docstring's table, row by row, with ``reduce_bw`` given: only all_reduce,
    reduce_scatter (and reduce) pay a reduction; the whole record is exact (auto is direct for
    a send and a barrier; a send's group is 2 ranks)."""
    t = collective_time(kind, N, ranks, LINK, algorithm=algo, reduce_bw_bytes_per_s=100e9)
    assert t.to_dict() == {
        "kind": kind, "algorithm": "direct" if algo == "auto" else algo,
        "size_bytes": N, "ranks": max(ranks, 2) if kind in ("send", "recv") else ranks,
        "time_ns": sum(terms),
        "terms": dict(zip(("latency_ns", "bandwidth_ns", "reduction_ns"), terms, strict=True)),
    }  # fmt: skip


def test_nothing_to_send_pays_only_latency_and_a_slow_link_scales_only_bandwidth():
    """Size 0 is valid: the steps' latency alone (auto picks tree below 256 KiB on 8 ranks:
    6 x 500). A link 2x slower doubles the bandwidth terms and keeps everything else, record
    included: 7000 + 2 x 36,700 for the ring all_reduce of 1 MiB; a hierarchical one doubles both
    its intra and inter bandwidth terms (16 MiB over 2 DGX A100: 122,334 and 91,180)."""
    zero = collective_time("all_reduce", 0, 8, LINK)
    assert zero.to_dict() == {"kind": "all_reduce", "algorithm": "tree", "size_bytes": 0,
                              "ranks": 8, "time_ns": 3000, "terms": {
                                  "latency_ns": 3000, "bandwidth_ns": 0, "reduction_ns": 0}}  # fmt: skip
    slow = collective_time("all_reduce", N, 8, LINK, algorithm="ring").with_bandwidth_scaled(2.0)
    assert slow.to_dict() == {"kind": "all_reduce", "algorithm": "ring", "size_bytes": N,
                              "ranks": 8, "time_ns": 80_400, "terms": {
                                  "latency_ns": 7000, "bandwidth_ns": 73_400, "reduction_ns": 0}}  # fmt: skip
    hier = collective_time("all_gather", 16 * N, 16, preset("dgx-a100"), algorithm="hierarchical")
    assert dict(hier.with_bandwidth_scaled(2.0).terms) == {
        "intra_latency_ns": 7000, "intra_bandwidth_ns": 122_334, "inter_latency_ns": 5000,
        "inter_bandwidth_ns": 91_180, "reduction_ns": 0}  # fmt: skip


@pytest.mark.parametrize(("kind", "ranks", "protocol", "terms"), [
    # ll halves both links: 2 x 7/8 x 16 MiB / 120 and 2 x 1/2 x 16 MiB / 92 bytes/ns
    ("all_reduce", 16, "ll", (14_000, 244_668, 10_000, 182_361)),
    # 3 nodes of 8: (N-1)/N = 2/3 of 16 MiB over the NICs (184 bytes/ns), 2 inter steps
    ("all_gather", 24, "simple", (7000, 61_167, 10_000, 60_787)),
])  # fmt: skip
def test_hierarchical_protocol_and_three_nodes(kind, ranks, protocol, terms):
    """Hierarchical on DGX A100 nodes (NVLink 240 bytes/ns, 1000 ns; NICs 184 bytes/ns per node,
    5000 ns), 16 MiB, with the protocol's efficiency applied to both links; a non-reducing
    collective has no reduction even with ``reduce_bw`` as slow as 1 byte/ns."""
    t = collective_time(kind, 16 * N, ranks, preset("dgx-a100"), algorithm="hierarchical",
                        protocol=protocol, reduce_bw_bytes_per_s=1e9)  # fmt: skip
    names = ("intra_latency_ns", "intra_bandwidth_ns", "inter_latency_ns", "inter_bandwidth_ns")
    reduction = {"all_reduce": round(15 / 16 * 16 * N), "all_gather": 0}[kind]
    assert dict(t.terms) == {**dict(zip(names, terms, strict=True)), "reduction_ns": reduction}


def test_an_all_to_all_of_46_gb_over_two_dgx_a100_takes_one_second():
    """4 x 46e9 bytes leave each node over its 184e9 bytes/s of NICs (g (p-g)/p n = 8 x 8 / 16
    n): exactly 1 s, 1,000,000,000 ns; the NVLink part (7/16 n / 240e9) is shorter; one latency,
    the inter-node 5000 ns."""
    t = collective_time("all_to_all", 46 * 10**9, 16, preset("dgx-a100"))
    assert dict(t.terms) == {"latency_ns": 5000, "bandwidth_ns": 10**9, "reduction_ns": 0}


def test_names_and_unsupported_combinations_are_refused_with_exactly_this_text():
    """Every refusal of the cost model is one ConfigError with exactly this text."""
    known = ("all_reduce, reduce, all_gather, gather, scatter, broadcast, all_to_all, "
             "reduce_scatter, reduce_scatter_block, barrier, send, recv")  # fmt: skip
    cases = [
        (lambda: comm_kind(42), "unknown collective type 42"),
        (lambda: comm_kind("allscatter"), f"unknown collective 'allscatter'; known: {known}"),
        (lambda: collective_time("all_reduce", N, 8, LINK, algorithm="star"),
         "unknown algorithm 'star'; known: auto, ring, tree, direct, halving_doubling, "
         "hierarchical"),
        (lambda: collective_time("all_reduce", N, 8, LINK, protocol="fast"),
         "unknown protocol 'fast'; known: simple, ll128, ll"),
        (lambda: collective_time("all_reduce", N, 8, LINK, algorithm="hierarchical"),
         "the hierarchical algorithm needs a --topology (nodes and links)"),
        (lambda: collective_time("broadcast", N, 16, preset("dgx-a100"), algorithm="hierarchical"),
         "algorithm 'hierarchical' does not apply to broadcast"),
        (lambda: collective_time("all_reduce", N, 16, preset("pcie-8gpu"),
                                 algorithm="hierarchical"),
         "16 ranks do not fit on topology pcie-8gpu (no inter-node network)"),
    ]  # fmt: skip
    for call, message in cases:
        with pytest.raises(ConfigError) as err:
            call()
        assert str(err.value) == message
