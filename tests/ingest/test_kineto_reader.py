"""read_kineto on real traces: facts pinned from the realdata README and the files themselves."""

from __future__ import annotations

import numpy as np
import pytest
from tests.realdata import trace

from lumos.ingest.kineto import read_kineto
from lumos.ingest.kineto_schema import Category
from lumos.ingest.summary import summarize_kineto


@pytest.fixture(scope="module")
def nccl():
    """The 2-rank NCCL A100 trace (rank 0) with collective metadata, read in place."""
    return read_kineto(trace("nccl_a100"))


def test_nccl_profiler_steps_match_readme(nccl):
    assert nccl.steps.name == ("ProfilerStep#4", "ProfilerStep#5", "ProfilerStep#6")
    ms = (nccl.steps.dur_ns / 1e6).round(1).tolist()
    assert ms == [222.4, 219.7, 224.9]


def test_nccl_streams_and_comm_kernels(nccl):
    s = summarize_kineto(nccl)
    assert [(x["device"], x["stream"]) for x in s["streams"]] == [(0, 7), (0, 40)]
    assert s["comm_kernels"] == {"all_reduce": 15, "broadcast": 6}
    assert s["collectives"] == {"all_reduce": 15, "broadcast": 6}
    assert s["rank"] == 0 and s["world_size"] == 2 and s["device"].startswith("NVIDIA A100")


def test_nccl_collective_metadata(nccl):
    c = nccl.collectives
    assert set(c.pg_name) == {"0"}
    assert all(r == (0, 1) for r in c.pg_ranks)
    ar = [i for i, k in enumerate(c.kind) if k == "all_reduce"]
    # 2049000 float elements = 8196000 bytes, the first all-reduce of every step
    assert 8_196_000 in c.size_bytes[ar].tolist()
    assert (c.group_size == 2).all()


def test_times_are_integer_ns_and_sorted_per_processor(nccl):
    ev = nccl.events
    assert ev.ts_ns.dtype == np.int64 and ev.dur_ns.dtype == np.int64
    for lo, hi in nccl.processor_slices():
        assert (np.diff(ev.ts_ns[lo:hi]) >= 0).all()
    # ns fractions survive: 4458676522690.655 us in the file
    assert (ev.ts_ns % 1000 != 0).any()


def test_launch_correlation_links_runtime_and_kernels(nccl):
    ev = nccl.events
    kern = ev.correlation_id[ev.cat == int(Category.KERNEL)]
    rt = set(ev.correlation_id[ev.cat == int(Category.RUNTIME)].tolist())
    assert np.mean([k in rt for k in kern.tolist()]) > 0.99


def test_fwdbwd_flows_bind_both_ends(nccl):
    f = nccl.flows
    assert len(f) == 543
    assert (f.src_event_idx >= 0).all() and (f.dst_event_idx >= 0).all()
    assert f.num_launch_flows == 12514


def test_gloo_dialect_sizes_from_input_dims():
    t = read_kineto(trace("gloo_cpu_only"))
    c = t.collectives
    assert c.counts_by_kind() == {"all_reduce": 10}
    assert set(c.dialect) == {"gloo"}
    assert sorted(set(c.size_bytes.tolist())) == [321271 * 4, 2082411 * 4]
    assert t.meta.rank == 34 and t.meta.world_size == 300
    assert len(t.meta.process_groups) == 11  # pg_config lists 11 groups (pg_count says 10)


def test_legacy_2021_categories_and_string_tids():
    t = read_kineto(trace("legacy_2021_v100"))
    assert len(t.steps) == 6
    counts = {
        Category(c).name: int(n)
        for c, n in zip(*np.unique(t.events.cat, return_counts=True), strict=False)
    }
    assert counts["KERNEL"] == 8772 and counts["RUNTIME"] > 0 and counts["CPU_OP"] > 0
    # "stream 7" string tids land on GPU 0 stream 7
    s = summarize_kineto(t)
    assert [(x["device"], x["stream"], x["num_kernels"]) for x in s["streams"]] == [(0, 7, 8772)]
    # legacy lower-case "external id" is read
    assert (t.events.external_id >= 0).mean() > 0.5


def test_hip_trace_reads_hex_stream_args():
    t = read_kineto(trace("hip_mi250"))
    assert t.diagnostics == {}
    rt = t.events.cat == int(Category.RUNTIME)
    assert (t.events.stream[rt] == 0).any()
    assert len(t.steps) == 2


def test_cuda_sync_events_are_collected():
    t = read_kineto(trace("cuda_event_sync_multi_stream"))
    assert len(t.sync_events) == 5
    swe = t.sync_events.kind == 3
    assert (t.sync_events.record_correlation_id[swe] >= 0).all()


def test_dlrm_ranks_share_one_clock():
    tar = trace("dlrm_kineto_8rank")
    import tarfile

    with tarfile.open(tar) as tf:
        members = sorted(m.name for m in tf.getmembers() if m.isfile())
    traces = [read_kineto(tar, m) for m in members]
    assert sorted(t.meta.rank for t in traces) == list(range(8))
    starts = np.array([t.steps.ts_ns[0] for t in traces])
    ends = np.array([t.steps.ts_ns[0] + t.steps.dur_ns[0] for t in traces])
    # one shared clock: every rank's step overlaps every other's
    assert starts.max() < ends.min()
    for t in traces:
        assert t.collectives.counts_by_kind() == {"all_reduce": 3, "all_to_all": 5}


def test_rccl_generic_kernels_take_kind_from_metadata():
    t = read_kineto(trace("rccl_mi300"))
    assert len(t.steps) == 3
    assert t.collectives.counts_by_kind() == {"all_reduce": 6, "broadcast": 6}
    assert set(t.collectives.dtype) >= {"BFloat16"}
