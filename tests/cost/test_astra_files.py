"""ASTRA-sim network files (write, read back, refuse) and the network fit, with exact values.

The fit cases use all-gathers over 2 ranks with 1 chunk: by the module docstring of
:mod:`lumos.cost.astra`, such a collective of ``2m`` bytes (message ``m``, one hop, two endpoint
delays of 10 ns) takes ``20 + L + floor(m / B)`` ns, so a sample's row is ``(1, m, 20)`` and the
least-squares fit of two samples solves ``L + m k = y - 20`` exactly (``k = 1e9 / bw`` in ns per
byte at 1 GB/s).
"""

from __future__ import annotations

import json

import pytest

from lumos.cost.astra_files import (
    AstraNetwork,
    CommSample,
    fit_astra_network,
    read_astra_network,
    write_astra_configs,
)
from lumos.errors import InputError

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
