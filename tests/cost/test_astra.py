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


def test_unsupported():
    with pytest.raises(ConfigError):
        astra_time("broadcast", N, 8, CFG)
    with pytest.raises(ConfigError):
        astra_time("all_reduce", N, 8, CFG, algorithm="direct")
    with pytest.raises(ConfigError):
        AstraConfig(bw_bytes_per_s=1e9, latency_ns=0, chunks=0)
    with pytest.raises(ConfigError, match="size >= 0, got 8 and -1"):
        astra_time("all_reduce", -1, 8, CFG)


@pytest.mark.parametrize(("fields", "message"), [
    ({"bw_bytes_per_s": 0.0}, "bandwidth must be positive, got 0.0"),
    ({"bw_bytes_per_s": float("inf")}, "bandwidth must be positive, got inf"),
    ({"local_mem_bw_bytes_per_s": -1.0}, "local-mem-bw must be positive, got -1.0"),
    ({"chunks": 0}, "chunks must be >= 1, got 0"),
    ({"latency_ns": -1}, "latency and endpoint delay must be >= 0"),
    ({"endpoint_delay_ns": -1}, "latency and endpoint delay must be >= 0"),
])  # fmt: skip
def test_a_bad_config_is_refused_naming_the_field_and_its_value(fields, message):
    """Each invalid field of an ``AstraConfig`` raises one ConfigError with exactly this text."""
    with pytest.raises(ConfigError) as err:
        AstraConfig(**{"bw_bytes_per_s": 1e9, "latency_ns": 0, **fields})
    assert str(err.value) == message
