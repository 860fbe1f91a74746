"""ASTRA-sim-compatible mode: its regression reference and hand-derived ring/direct values.

Config (ASTRA-sim's tests/rt_template): 8 NPUs, 50 GB/s links (ASTRA-sim: 1 GB = 2^30 bytes, so
53.6870912 bytes/ns), 500 ns latency, 4 chunks, endpoint delay 10 ns, local-mem-bw 50 GB/s
(10^9 bytes per GB). With 1 MiB: a chunk is 262,144 bytes; the ring message chunk/8 = 32,768
bytes; serialization floor(32768 / 53.6870912) = floor(610.35) = 610 ns; reduction
3 x floor(32768 / 50) = 3 x 655 = 1965 ns; one hop + endpoint = 500 + 610 + 10 = 1120 ns.
"""

from __future__ import annotations

import pytest

from lumos.cost.astra import AstraConfig, astra_time
from lumos.errors import ConfigError
from lumos.graph.kinds import CommType

CFG = AstraConfig(bw_bytes_per_s=50 * 2**30, latency_ns=500, chunks=4, endpoint_delay_ns=10,
                  local_mem_bw_bytes_per_s=50e9)  # fmt: skip
N = 1 << 20


def test_reference_all_reduce_117780():
    """Per chunk: 10 + 14 x 1120 + 7 x 1965 = 10 + 15680 + 13755 = 29445; x 4 = 117780. Term by
    term over the 4 chunks: 15 endpoint delays (14 hops + the start) x 10 x 4 = 600, 14 x 500
    x 4 = 28000 of latency, 14 x 610 x 4 = 34160 of serialization, 7 x 1965 x 4 = 55020 of
    reduction; the record names the collective and the (default) ring."""
    assert astra_time("all_reduce", N, 8, CFG).to_dict() == {
        "kind": "all_reduce", "algorithm": "ring", "size_bytes": N, "ranks": 8,
        "time_ns": 117_780, "terms": {"endpoint_ns": 600, "latency_ns": 28000,
                                      "bandwidth_ns": 34160, "reduction_ns": 55020}}  # fmt: skip


def test_a_reduce_scatter_block_is_timed_as_a_reduce_scatter():
    """PyTorch's ``reduce_scatter_tensor`` (REDUCE_SCATTER_BLOCK) is ASTRA-sim's reduce_scatter:
    the same 86,420 ns as the ring case below, and recorded under that name."""
    t = astra_time(CommType.REDUCE_SCATTER_BLOCK, N, 8, CFG)
    assert (t.kind, t.algorithm, t.time_ns) == ("reduce_scatter", "ring", 86_420)


@pytest.mark.parametrize(("kind", "algo", "expected"), [
    # reduce_scatter ring: 10 + 7 x (1120 + 1965) = 21605 per chunk; x 4 = 86420
    ("reduce_scatter", "ring", 86_420),
    # all_gather ring: output 1 MiB -> 131072 bytes per rank -> chunk 32768 = the message;
    # 10 + 7 x 1120 = 7850 per chunk; x 4 = 31400
    ("all_gather", "ring", 31_400),
    # all_to_all ring: 8*7/2 = 28 sequential hops: 10 + 28 x 1120 = 31370; x 4 = 125480
    ("all_to_all", "ring", 125_480),
    # direct (fully connected, all messages at once): 10 + 500 + 610 + 10 = 1130; x 4 = 4520
    ("all_to_all", "direct", 4_520),
    ("all_gather", "direct", 4_520),
    # reduce_scatter direct adds one (concurrent) reduction: 1130 + 1965 = 3095; x 4 = 12380
    ("reduce_scatter", "direct", 12_380),
])  # fmt: skip
def test_ring_and_direct(kind, algo, expected):
    t = astra_time(kind, N, 8, CFG, algorithm=algo)
    assert (t.kind, t.algorithm, t.size_bytes, t.ranks, t.time_ns) == (kind, algo, N, 8, expected)


def test_tiny_chunks_are_raised_to_one_byte_per_rank():
    # 16 bytes / 4 chunks = 4 < 8 ranks -> chunk 8 bytes, 2 chunks, message 1 byte (0 ns)
    one = AstraConfig(bw_bytes_per_s=50 * 2**30, latency_ns=500, chunks=4)
    t = astra_time("reduce_scatter", 16, 8, one)
    # per chunk: 10 + 7 x (500 + 0 + 10 + 3 x floor(1 / 50)) = 3580; 2 chunks
    assert t.time_ns == 2 * 3580


@pytest.mark.parametrize(("kind", "size", "ranks"), [
    ("all_reduce", 0, 8), ("all_gather", 0, 8), ("all_reduce", N, 1), ("all_to_all", N, 1),
])  # fmt: skip
def test_nothing_to_send_costs_nothing(kind, size, ranks):
    """Size 0 (nothing moves) or one rank (no peer): every term is exactly 0, not an error; the
    record still names the collective and the algorithm ("auto" is ASTRA-sim's ring)."""
    for algorithm in ("ring", "auto"):
        t = astra_time(kind, size, ranks, CFG, algorithm=algorithm)
        assert dict(t.terms) == {"endpoint_ns": 0, "latency_ns": 0, "bandwidth_ns": 0,
                                 "reduction_ns": 0}  # fmt: skip
        assert (t.kind, t.algorithm, t.time_ns, t.size_bytes, t.ranks) == (
            kind, "ring", 0, size, ranks)  # fmt: skip


MODES = "the ASTRA-sim-compatible mode"


@pytest.mark.parametrize(("kind", "size", "ranks", "algorithm", "message"), [
    ("broadcast", N, 8, "ring", f"{MODES} models all_reduce, reduce_scatter, all_gather and "
     "all_to_all, not broadcast"),
    ("all_gather", N, 8, "tree", f"{MODES} has algorithms ring, direct, not 'tree'"),
    ("all_reduce", N, 8, "direct", f"{MODES} has no direct all_reduce; use ring"),
    ("all_reduce", -1, 8, "ring", "need ranks >= 1 and size >= 0, got 8 and -1"),
    ("all_gather", N, 0, "auto", "need ranks >= 1 and size >= 0, got 0 and 1048576"),
])  # fmt: skip
def test_unsupported(kind, size, ranks, algorithm, message):
    """What the mode does not model is one ConfigError with exactly this text: the collective
    (lower case), the algorithm (quoted) or the bad ranks and size."""
    with pytest.raises(ConfigError) as err:
        astra_time(kind, size, ranks, CFG, algorithm=algorithm)
    assert str(err.value) == message


# 0.5 bytes/ns links and local memory (a byte costs 2 ns), 100 ns latency, endpoint delay 10
SLOW = {"bw_bytes_per_s": 0.5e9, "latency_ns": 100, "local_mem_bw_bytes_per_s": 0.5e9}


@pytest.mark.parametrize(("kind", "size", "ranks", "chunks", "terms"), [
    # 15 bytes over 2 ranks: message floor(15 / 2) = 7 bytes (the odd byte is not sent), so
    # serialization 7 x 2 = 14 ns and reduction 3 x 14 = 42 ns; 1 hop, 2 endpoint delays
    ("reduce_scatter", 15, 2, 1, (20, 100, 14, 42)),
    # an all_gather's output of 9 bytes is floor(9 / 2) = 4 bytes per rank: one chunk, one
    # message of 4 bytes (8 ns), 1 hop
    ("all_gather", 9, 2, 1, (20, 100, 8, 0)),
    # 10 bytes in 4 splits: chunks of floor(10 / 4) = 2 bytes (not below 2 ranks), so
    # ceil(10 / 2) = 5 chunks, each a message of 1 byte (2 ns; reduction 3 x 2 = 6 ns) over
    # 2 hops with 3 endpoint delays: 5 x 3 x 10, 5 x 2 x 100, 5 x 2 x 2, 5 x 1 x 6
    ("all_reduce", 10, 2, 4, (150, 1000, 20, 30)),
    # all_to_all ring over 3 ranks: 3 x 2 / 2 = 3 hops, 4 endpoint delays, message 12 / 3 = 4
    ("all_to_all", 12, 3, 1, (40, 300, 24, 0)),
])  # fmt: skip
def test_sizes_that_do_not_divide_are_cut_to_whole_bytes(kind, size, ranks, chunks, terms):
    """Messages and chunks are whole bytes (integer division, as ASTRA-sim's), and every term is
    an integer number of ns (the record is written as JSON: ``125480``, never ``125480.0``)."""
    t = astra_time(kind, size, ranks, AstraConfig(chunks=chunks, **SLOW))
    names = ("endpoint_ns", "latency_ns", "bandwidth_ns", "reduction_ns")
    assert dict(t.terms) == dict(zip(names, terms, strict=True))
    assert [type(v) for v in t.terms.values()] == [int] * 4
    assert type(t.time_ns) is int and t.time_ns == sum(terms)


@pytest.mark.parametrize(("fields", "message"), [
    ({"bw_bytes_per_s": 0.0}, "bandwidth must be positive, got 0.0"),
    ({"bw_bytes_per_s": float("inf")}, "bandwidth must be positive, got inf"),
    ({"local_mem_bw_bytes_per_s": -1.0}, "local-mem-bw must be positive, got -1.0"),
    ({"local_mem_bw_bytes_per_s": 0.0}, "local-mem-bw must be positive, got 0.0"),
    ({"local_mem_bw_bytes_per_s": float("inf")}, "local-mem-bw must be positive, got inf"),
    ({"chunks": 0}, "chunks must be >= 1, got 0"),
    ({"latency_ns": -1}, "latency and endpoint delay must be >= 0"),
    ({"endpoint_delay_ns": -1}, "latency and endpoint delay must be >= 0"),
])  # fmt: skip
def test_a_bad_config_is_refused_naming_the_field_and_its_value(fields, message):
    """Each invalid field of an ``AstraConfig`` raises one ConfigError with exactly this text."""
    with pytest.raises(ConfigError) as err:
        AstraConfig(**{"bw_bytes_per_s": 1e9, "latency_ns": 0, **fields})
    assert str(err.value) == message


@pytest.mark.parametrize("bw", [1.0, 0.5])
def test_any_positive_finite_bandwidth_and_zero_delays_are_valid(bw):
    """The bounds are open at 0 only: a link and a local memory of one byte per second, or half
    of one, are slow but valid, and so are no latency and no endpoint delay; the config keeps
    every field as given."""
    cfg = AstraConfig(bw_bytes_per_s=bw, latency_ns=0, chunks=1, endpoint_delay_ns=0,
                      local_mem_bw_bytes_per_s=bw)  # fmt: skip
    assert (cfg.bw_bytes_per_s, cfg.local_mem_bw_bytes_per_s) == (bw, bw)
    assert (cfg.latency_ns, cfg.chunks, cfg.endpoint_delay_ns) == (0, 1, 0)
