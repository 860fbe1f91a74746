"""ASTRA-sim network files (write, read back, refuse) and the network fit, with exact values.

The fit cases use all-gathers over 2 ranks with 1 chunk: by the module docstring of
:mod:`lumos.cost.astra`, such a collective of ``2m`` bytes (message ``m``, one hop, two endpoint
delays of 10 ns) takes ``20 + L + floor(m / B)`` ns, so a sample's row is ``(1, m, 20)`` and the
least-squares fit of two samples solves ``L + m k = y - 20`` exactly (``k = 1e9 / bw`` in ns per
byte at 1 GB/s).
"""

from __future__ import annotations

import json
import math

import pytest

from lumos.cost.astra_files import (
    AstraNetwork,
    CommSample,
    fit_astra_network,
    read_astra_network,
    write_astra_configs,
)
from lumos.errors import ConfigError, InputError

RT = AstraNetwork(npus=8, bw_bytes_per_s=50 * 2**30, latency_ns=500, chunks=4)


def test_files_hold_exactly_astra_sims_keys(tmp_path):
    """The three files, their text and keys as ASTRA-sim's analytical binaries read them (50 GB/s
    of 2^30 bytes, local-mem-bw 50 GB/s of 10^9 bytes), written into a folder made on the way."""
    out = tmp_path / "not" / "yet"
    paths = write_astra_configs(RT, out)
    assert paths == [out / "network.yml", out / "system.json", out / "remote_memory.json"]
    assert (out / "network.yml").read_text() == (
        "# written by lumos (ASTRA-sim analytical backend; bandwidth in GB/s of 2^30 bytes)\n"
        "topology: [ Ring ]\nnpus_count: [ 8 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n"
    )
    assert json.loads((out / "system.json").read_text()) == {
        "scheduling-policy": "FIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
        "preferred-dataset-splits": 4, "all-reduce-implementation": ["ring"],
        "all-gather-implementation": ["ring"], "reduce-scatter-implementation": ["ring"],
        "all-to-all-implementation": ["ring"], "collective-optimization": "localBWAware",
        "local-mem-bw": 50.0, "boost-mode": 0, "roofline-enabled": 0,
    }  # fmt: skip
    assert json.loads((out / "remote_memory.json").read_text()) == {
        "memory-type": "NO_MEMORY_EXPANSION"}  # fmt: skip
    assert read_astra_network(out) == RT


def test_json_files_are_written_indented_by_two_with_a_final_newline(tmp_path):
    """The JSON files' exact text, as a person diffs them: keys in ASTRA-sim's order, indented
    by two spaces (one list item a line), and a newline at the end of each file."""
    write_astra_configs(RT, tmp_path)
    assert (tmp_path / "system.json").read_text() == (
        "{\n"
        '  "scheduling-policy": "FIFO",\n'
        '  "endpoint-delay": 10,\n'
        '  "active-chunks-per-dimension": 1,\n'
        '  "preferred-dataset-splits": 4,\n'
        '  "all-reduce-implementation": [\n    "ring"\n  ],\n'
        '  "all-gather-implementation": [\n    "ring"\n  ],\n'
        '  "reduce-scatter-implementation": [\n    "ring"\n  ],\n'
        '  "all-to-all-implementation": [\n    "ring"\n  ],\n'
        '  "collective-optimization": "localBWAware",\n'
        '  "local-mem-bw": 50.0,\n'
        '  "boost-mode": 0,\n'
        '  "roofline-enabled": 0\n'
        "}\n"
    )
    assert (tmp_path / "remote_memory.json").read_text() == (
        '{\n  "memory-type": "NO_MEMORY_EXPANSION"\n}\n'
    )


def _yml(path, drop="", add=""):
    lines = [ln for ln in path.read_text().splitlines(keepends=True) if not ln.startswith(drop)]
    path.write_text("".join(lines) + add)


def _system(path, **changes):
    doc = json.loads(path.read_text())
    doc.update({k.replace("_", "-"): v for k, v in changes.items()})
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize(("edit", "file", "problem"), [
    (lambda d: _yml(d / "network.yml", drop="npus", add="npus_count: 8\n"), "network.yml",
     "cannot read the line 'npus_count: 8'"),
    (lambda d: _yml(d / "network.yml", drop="latency"), "network.yml", "has no 'latency'"),
    (lambda d: _yml(d / "network.yml", drop="bandwidth", add="bandwidth: [ 50.0, 50.0 ]\n"),
     "network.yml", "lumos models a one-dimensional Ring network only"),
    (lambda d: (d / "system.json").unlink(), "system.json",
     "not found (lumos convert --target astra-sim writes it)"),
    (lambda d: _system(d / "system.json", active_chunks_per_dimension=2), "system.json",
     "active-chunks-per-dimension must be 1"),
    (lambda d: _system(d / "system.json", roofline_enabled=1), "system.json",
     "roofline-enabled must be 0 (lumos replays durations)"),
    (lambda d: _system(d / "system.json", endpoint_delay="fast"), "system.json",
     "cannot read the network settings: invalid literal for int() with base 10: 'fast'"),
] + [
    (lambda d, k=key: _system(d / "system.json", **{f"{k}_implementation": ["direct"]}),
     "system.json", f"{key.replace('_', '-')}-implementation must be ['ring']")
    for key in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
])  # fmt: skip
def test_read_refuses_with_the_file_and_the_problem(tmp_path, edit, file, problem):
    """Each setting lumos does not model (or a file it cannot read) is one InputError that
    names the file: ``<path>: <problem>``."""
    write_astra_configs(RT, tmp_path)
    edit(tmp_path)
    with pytest.raises(InputError) as err:
        read_astra_network(tmp_path)
    assert err.value.path == str(tmp_path / file)
    assert str(err.value) == f"{tmp_path / file}: {problem}"


# y = 20 + L + m k at m = 1000 and 4000 with k = 3001/3000: the two rows give
# k = (y2 - y1) / 3000 and L = y1 - 20 - 1000 k.
@pytest.mark.parametrize(("y1", "y2", "latency_ns"), [
    (1021, 4022, 0.667),  # k = 3001/3000, L = 1021 - 20 - 1000.333.. = 2/3 -> 0.667
    (2521, 5522, 1500.667),  # the same link with 1500 ns more latency: L = 1500 + 2/3
])  # fmt: skip
def test_fit_solves_two_exact_samples(y1, y2, latency_ns):
    """Latency kept to 3 decimals (a fraction of a ns is a fit, not a fallback); samples of
    another kind, of one rank or of size 0 are left out. The fitted network then predicts the
    samples exactly: latency rounded to whole ns (1 or 1501), serialization floor(1000.33) =
    1000 and floor(4001.33) = 4001 ns."""
    samples = [
        CommSample("all_gather", 2000, 2, y1), CommSample("all_gather", 8000, 2, y2),
        CommSample("broadcast", 2000, 2, 10**6), CommSample("all_gather", 2000, 1, 10**6),
        CommSample("all_gather", 0, 2, 10**6),
    ]  # fmt: skip
    net, rep = fit_astra_network(samples, 2)
    assert net.latency_ns == latency_ns
    assert net.bw_bytes_per_s == pytest.approx(1e9 * 3000 / 3001, rel=1e-12)
    assert (net.npus, net.chunks, net.endpoint_delay_ns, net.local_mem_bw_bytes_per_s) == (
        2, 1, 10, 50e9)  # fmt: skip
    assert rep == {
        "samples": 2, "latency_ns": latency_ns, "bw_bytes_per_s": net.bw_bytes_per_s,
        "measured_total_ns": y1 + y2, "predicted_total_ns": y1 + y2, "rel_rms": 0.0,
        "note": "",
    }  # fmt: skip


FALLBACK = "bandwidth fitted at latency 0 (latency and bandwidth not separable)"


@pytest.mark.parametrize(("samples", "measured", "predicted", "rel_rms"), [
    # one all-gather of 1 byte over 2 ranks: no message (0 bytes per rank), a bandwidth
    # coefficient of 0; predicted: the two endpoint delays, 20 ns; |20 - 50| / 50 = 0.6
    ([CommSample("all_gather", 1, 2, 50)], 50, 20, 0.6),
    # times that the endpoint delays alone explain (20 ns at 1000 and 4000 bytes): the line
    # fit gives 1e9 / bw = 0 (an infinitely fast link), which is refused; the fallback finds 0
    # too; at the 1e15 bytes/s cap serialization is floor(1000 / 1e6) = 0 ns
    ([CommSample("all_gather", 2000, 2, 20), CommSample("all_gather", 8000, 2, 20)], 40, 40, 0.0),
])  # fmt: skip
def test_fit_without_a_bandwidth_signal_caps_the_link(samples, measured, predicted, rel_rms):
    """Nothing in the samples grows with size: latency 0, bandwidth at its 1e15 bytes/s cap, and
    the report says the line fit was not used."""
    net, rep = fit_astra_network(samples, 2)
    assert (net.latency_ns, net.bw_bytes_per_s) == (0.0, 1e15)
    assert rep == {
        "samples": len(samples), "latency_ns": 0.0, "bw_bytes_per_s": 1e15,
        "measured_total_ns": measured, "predicted_total_ns": predicted, "rel_rms": rel_rms,
        "note": FALLBACK,
    }  # fmt: skip


def test_fit_report_compares_in_the_fits_own_float64_arithmetic():
    """The report's totals are float64 sums, the arithmetic of the least squares, so a network
    that reproduces a sample to float64's resolution reports equal totals and no error, even
    past 2^53 ns where not every integer is a float64.

    One all-gather of 2^31 bytes over 2 ranks (one message of m = 2^30 bytes, one hop, two
    endpoint delays of 11 ns: c = 22) measured at 2^54 + 24 ns. One sample: the fallback,
    latency 0 and k = r / m with r = 2^54 + 24 - 22 = 2^54 + 2, which float64 (spacing 4
    there) rounds to 2^54 (the tie goes to the even mantissa): k = 2^24 ns per byte at 1 GB/s,
    so bw = 1e9 / 2^24 bytes/s and serialization is m k = 2^54 exactly. The network's time is
    22 + 2^54 ns, which as a float64 is 2^54 + 24 (a tie again, to even): the measured total."""
    sample = CommSample("all_gather", 2**31, 2, 2**54 + 24)
    net, rep = fit_astra_network([sample], 2, endpoint_delay_ns=11)
    assert (net.latency_ns, net.bw_bytes_per_s) == (0.0, 1e9 / 2**24)
    assert net.collective_ns("all_gather", 2**31, 2) == 2**54 + 22
    assert rep == {
        "samples": 1, "latency_ns": 0.0, "bw_bytes_per_s": 1e9 / 2**24,
        "measured_total_ns": 2**54 + 24, "predicted_total_ns": 2**54 + 24, "rel_rms": 0.0,
        "note": FALLBACK,
    }  # fmt: skip


def test_a_network_is_at_least_one_npu_and_reads_back_every_setting(tmp_path):
    """One NPU is a valid network, none is refused naming the value; every setting lumos writes
    (npus, bandwidth, latency, chunks, endpoint delay, local-mem-bw) reads back as written, and
    a ``system.json`` that states none of the optional keys reads as ASTRA-sim's defaults:
    ring collectives, one active chunk, roofline off, 1 split, endpoint delay 10 ns, local
    memory 50 GB/s (10^9 bytes per GB)."""
    assert AstraNetwork(npus=1, bw_bytes_per_s=1e9, latency_ns=0).npus == 1
    with pytest.raises(ConfigError) as err:
        AstraNetwork(npus=0, bw_bytes_per_s=1e9, latency_ns=0)
    assert str(err.value) == "npus must be >= 1, got 0"
    odd = AstraNetwork(npus=3, bw_bytes_per_s=2 * 2**30, latency_ns=70, chunks=3,
                       endpoint_delay_ns=7, local_mem_bw_bytes_per_s=25e9)  # fmt: skip
    write_astra_configs(odd, tmp_path)
    assert read_astra_network(tmp_path) == odd
    (tmp_path / "system.json").write_text("{}")
    assert read_astra_network(tmp_path) == AstraNetwork(
        npus=3, bw_bytes_per_s=2 * 2**30, latency_ns=70, chunks=1, endpoint_delay_ns=10,
        local_mem_bw_bytes_per_s=50e9)  # fmt: skip


def test_fit_refuses_samples_with_nothing_to_fit():
    """Samples of another kind, of one rank or of size 0 leave nothing to fit: one ConfigError
    with exactly this text."""
    samples = [CommSample("broadcast", 8, 2, 5), CommSample("all_gather", 8, 1, 5),
               CommSample("all_reduce", 0, 4, 5)]  # fmt: skip
    with pytest.raises(ConfigError) as err:
        fit_astra_network(samples, 2)
    assert str(err.value) == (
        "no collective with a size and more than one rank to fit the network to"
    )


def test_fit_times_its_samples_with_the_chunks_and_local_memory_it_is_given():
    """Reduce-scatters over 2 ranks in 2 splits with local memory at 1 GB/s (1 byte/ns), so a
    sample's time depends on both. 4000 bytes: 2 chunks, each one message of 1000 bytes over
    1 hop, so per sample latency coefficient a = 2, bandwidth coefficient b = 2 x 1000 = 2000
    (ns at 1 GB/s) and fixed part c = 2 x (2 x 10 endpoint + 3 x 1000 reduction) = 6040;
    16000 bytes: a = 2, b = 8000, c = 2 x (20 + 12000) = 24040. Measured 7240 and 28242 ns:
    2L + 2000k = 1200 and 2L + 8000k = 4202, so k = 3002/6000 and L = 99 2/3 ns. The network
    then predicts each sample exactly: latency rounded to 100 ns, serialization floor(1000 k) =
    500 and floor(4000 k) = 2001 ns: 2 x (20 + 100 + 500 + 3000) = 7240 and
    2 x (20 + 100 + 2001 + 12000) = 28242."""
    samples = [CommSample("reduce_scatter", 4000, 2, 7240),
               CommSample("reduce_scatter", 16000, 2, 28242)]  # fmt: skip
    net, rep = fit_astra_network(samples, 2, chunks=2, local_mem_bw_bytes_per_s=1e9)
    assert net.bw_bytes_per_s == pytest.approx(1e9 * 6000 / 3002, rel=1e-12)
    assert (net.npus, net.latency_ns, net.chunks, net.endpoint_delay_ns,
            net.local_mem_bw_bytes_per_s) == (2, 99.667, 2, 10, 1e9)  # fmt: skip
    assert rep == {
        "samples": 2, "latency_ns": 99.667, "bw_bytes_per_s": net.bw_bytes_per_s,
        "measured_total_ns": 35482, "predicted_total_ns": 35482, "rel_rms": 0.0, "note": "",
    }  # fmt: skip


@pytest.mark.parametrize(("times", "measured", "predicted", "rel_rms"), [
    # the same size twice (rows (1, 1000) and (1, 1000): rank 1, no line through them):
    # r = 1000 and 3000 -> k = 4000 x 1000 / (2 x 1000^2) = 2 (bw 5e8); each predicted
    # 20 + 2000 = 2020 against 1020 and 3020: rms 1000 over the mean 2020
    ((1020, 3020), 4040, 4040, 1000 / 2020),
    # sizes 1000 and 4000 bytes per message (below): r = 960 and 4010 lie on a line of
    # negative latency (L = -56 2/3, k = 3050/3000), refused; k = (960 x 1000 + 4010 x 4000) /
    # (1000^2 + 4000^2) = 1 (bw 1e9): predicted 1020 and 4020 against 980 and 4030
    ((980, 4030), 5010, 5040, math.sqrt((40**2 + 10**2) / 2) / 2505),
])  # fmt: skip
def test_fit_falls_back_when_the_line_is_not_a_network(times, measured, predicted, rel_rms):
    """Two samples whose least-squares line has no single answer or a negative latency: the
    bandwidth alone is fitted at latency 0 (k = r.b / b.b), and the report says so."""
    second = 2000 if times == (1020, 3020) else 8000
    samples = [CommSample("all_gather", 2000, 2, times[0]),
               CommSample("all_gather", second, 2, times[1])]  # fmt: skip
    net, rep = fit_astra_network(samples, 2)
    bw = 5e8 if times == (1020, 3020) else 1e9
    assert (net.latency_ns, net.bw_bytes_per_s) == (0.0, bw)
    assert rep == {
        "samples": 2, "latency_ns": 0.0, "bw_bytes_per_s": bw, "measured_total_ns": measured,
        "predicted_total_ns": predicted, "rel_rms": rel_rms, "note": FALLBACK,
    }  # fmt: skip


M = 2**31 * 10**6 + 1  # a message of just over 2^31 x 10^6 bytes


@pytest.mark.parametrize(("size", "measured", "predicted", "rel_rms"), [
    # one all-gather of 2 x 10^7 bytes (a message of 10^7) in 21 ns: r = 1, k = 10^-7, so
    # bw = 10^16 bytes/s, capped at 10^15; serialization floor(10^7 / 10^6) = 10 ns: 30 ns
    (2 * 10**7, 21, 30, 9 / 21),
    # r = 2^31 over M = 2^31 x 10^6 + 1 bytes: bw = 10^9 M / 2^31 = 10^15 + 0.47 bytes/s, just
    # over the cap (float64 has steps of 0.125 there): capped, then serialization
    # floor(M / 10^6) = 2^31 ns, the measured time exactly
    (2 * M, 2**31 + 20, 2**31 + 20, 0.0),
])  # fmt: skip
def test_fit_caps_the_bandwidth_at_1e15(size, measured, predicted, rel_rms):
    """A fitted bandwidth above 10^15 bytes/s (a link ~4,000 times NVLink's) is capped at
    exactly 10^15, even when it is above by less than one byte/s."""
    net, rep = fit_astra_network([CommSample("all_gather", size, 2, measured)], 2)
    assert net.bw_bytes_per_s == 1e15
    assert rep == {
        "samples": 1, "latency_ns": 0.0, "bw_bytes_per_s": 1e15, "measured_total_ns": measured,
        "predicted_total_ns": predicted, "rel_rms": rel_rms, "note": FALLBACK,
    }  # fmt: skip


def test_fit_error_of_samples_measured_at_0_ns_is_over_1_ns():
    """A 1-byte all-gather over 2 ranks (no message: bandwidth coefficient 0) measured at 0 ns:
    the network predicts its two endpoint delays, 20 ns; the relative error divides the rms
    (20) by the mean time but never by less than 1 ns: 20.0."""
    net, rep = fit_astra_network([CommSample("all_gather", 1, 2, 0)], 2)
    assert (net.latency_ns, net.bw_bytes_per_s) == (0.0, 1e15)
    assert rep == {
        "samples": 1, "latency_ns": 0.0, "bw_bytes_per_s": 1e15, "measured_total_ns": 0,
        "predicted_total_ns": 20, "rel_rms": 20.0, "note": FALLBACK,
    }  # fmt: skip
