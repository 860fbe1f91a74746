"""Collective sizes as each collective defines them, on real traces (expected values by hand).

The convention (``lumos.ingest.kineto_comms``): all_reduce/broadcast = the tensor, all_gather =
its OUTPUT, reduce_scatter = its INPUT, all_to_all = what this rank sends (its input). Each
expected number below is the arithmetic on the trace's own args, written out.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.realdata import trace

from lumos.ingest.comm_args import collective_size_bytes
from lumos.ingest.kineto import read_kineto


def _rows(t, kind):
    c = t.collectives
    return [
        (int(c.in_bytes[i]), int(c.out_bytes[i]), int(c.size_bytes[i]))
        for i, k in enumerate(c.kind)
        if k == kind
    ]


def test_all_gather_size_is_the_gathered_output_b200():
    # record_param_comms: Collective name "_allgather_base", In msg nelems 25136,
    # Out msg nelems 201088, dtype BFloat16 (2 B), Group size 8; the enclosing
    # c10d::_allgather_base_ lists Input Dims [[8, 25136], [1, 25136]] (output first).
    t = read_kineto(trace("allgather_b200"))
    c = t.collectives
    assert c.counts_by_kind() == {"all_gather": 1}
    assert int(c.group_size[0]) == 8
    assert _rows(t, "all_gather") == [(25136 * 2, 201088 * 2, 201088 * 2)]
    assert 201088 == 8 * 25136  # "Out msg nelems" is the full output, "In" the shard


def test_all_gather_without_metadata_takes_output_from_c10d_first_tensor():
    # HTA sampled_rank-0, no collective metadata: c10d::_allgather_base_ Input Dims
    # [[1073741824], [16777216]] "signed char" (1 B): output first, then the input shard;
    # nccl:_all_gather_base Input Dims [[16777216]] (the input).
    t = read_kineto(trace("sendrecv_5streams_rank0"))
    assert set(_rows(t, "all_gather")) == {(16_777_216 * 1, 1_073_741_824 * 1, 1_073_741_824)}


def test_all_to_all_size_is_what_the_rank_sends():
    # the same file: c10d::alltoall_base_ Input Dims [[382132224], [419430400]] "unsigned char"
    # (output, input); the all-to-all sends its input, 419430400 B, and receives 382132224 B.
    t = read_kineto(trace("sendrecv_5streams_rank0"))
    rows = set(_rows(t, "all_to_all"))
    assert (419_430_400, 382_132_224, 419_430_400) in rows
    # [[2621440], [2846720]] int32 (4 B): sends 2846720 * 4, receives 2621440 * 4
    assert (2_846_720 * 4, 2_621_440 * 4, 2_846_720 * 4) in rows


def test_dlrm_all_to_allv_size_is_the_input_and_matches_the_et():
    # DLRM rank 2: Kineto c10d::alltoall_base_ Input Dims [[2304], [3392]] int (4 B), output
    # first; the ET of the same run records all_to_allv in_msg_nelems 3392 (in splits
    # 96+224+288+1664+592+96+192+240) and out 2304 (= 8 x 288).
    import tarfile

    tar = trace("dlrm_kineto_8rank")
    with tarfile.open(tar) as tf:
        member = next(m.name for m in tf.getmembers() if "worker2_" in m.name)
    t = read_kineto(tar, member)
    assert 96 + 224 + 288 + 1664 + 592 + 96 + 192 + 240 == 3392
    rows = _rows(t, "all_to_all")
    assert (3392 * 4, 2304 * 4, 3392 * 4) in rows  # 13,568 B sent, not 9,216
    assert (6144 * 4, 6144 * 4, 6144 * 4) in rows  # equal splits: in = out
    assert sorted(r[2] for r in _rows(t, "all_reduce")) == [112 * 4, 226960 * 4, 394241 * 4]


def test_dlrm_et_records_input_and_output_nelems_of_all_to_allv(tmp_path):
    from tests.realdata import extract_archive

    from lumos.ingest.pytorch_et import read_pytorch_et

    root = extract_archive("param/et_replay/tests/inputs/dlrm_pytorch_et.tar.gz", tmp_path)
    et = read_pytorch_et(root / "dlrm_pytorch_et" / "dlrm_eg_2.json")
    c = et.comm
    rows = [i for i in range(len(c)) if c.collective(i) == "all_to_allv"]
    pairs = {(int(c.in_nelems[i]), int(c.out_nelems[i])) for i in rows}
    assert (3392, 2304) in pairs


def test_all_reduce_and_broadcast_are_the_tensor():
    # HTA nccl_data (A100, NCCL metadata): allreduce In = Out msg nelems 2049000 Float (4 B);
    # broadcast 53120 Float and 53 Long (8 B).
    t = read_kineto(trace("nccl_a100"))
    assert (2049000 * 4, 2049000 * 4, 8_196_000) in _rows(t, "all_reduce")
    assert {r[2] for r in _rows(t, "broadcast")} == {53120 * 4, 53 * 8}
    # TraceLens MI300 (RCCL): 2873320 and 8816192 BFloat16 (2 B); broadcast 9600 BF16, 20 Long
    t = read_kineto(trace("rccl_mi300"))
    assert {r[2] for r in _rows(t, "all_reduce")} == {2873320 * 2, 8816192 * 2}
    assert {r[2] for r in _rows(t, "broadcast")} == {9600 * 2, 20 * 8}


def test_gloo_sizes_from_input_dims():
    # gloo:all_reduce Input Dims [[321271]] / [[2082411]], Input type "float" (4 B)
    t = read_kineto(trace("gloo_cpu_only"))
    assert {r[2] for r in _rows(t, "all_reduce")} == {321271 * 4, 2082411 * 4}


@pytest.mark.parametrize(
    ("kind", "in_b", "out_b", "group", "expected"),
    [
        # the reported case: reduce-scatter of a 587.2 MB input into 8 shards of 73.4 MB
        ("reduce_scatter", 587_202_560, 73_400_320, 8, 587_202_560),
        ("reduce_scatter", -1, 73_400_320, 8, 8 * 73_400_320),
        ("reduce_scatter", -1, 73_400_320, -1, -1),
        ("all_gather", 50_272, 402_176, 8, 402_176),
        ("all_gather", 50_272, -1, 8, 8 * 50_272),
        ("all_to_all", 157_900_000, 146_200_000, 8, 157_900_000),
        ("all_to_all", -1, 146_200_000, 8, 146_200_000),
        ("all_reduce", 1000, 1000, 2, 1000),
        ("all_reduce", 1000, -1, 2, 1000),
        # gather/scatter: NCCL records In = shard, Out = shard x group for both
        ("gather", 100, 800, 8, 800),
        ("scatter", 100, 800, 8, 800),
        ("scatter", 100, -1, 8, 800),  # old dialect: only nccl:scatter's (output) shard
        ("send", 64, -1, -1, 64),
        ("recv", -1, 64, -1, 64),
        ("unknown", 10, 20, 2, 20),
        ("all_reduce", -1, -1, 2, -1),
    ],
)
def test_size_convention_table(kind, in_b, out_b, group, expected):
    assert collective_size_bytes(kind, in_b, out_b, group) == expected


def test_gloo_tensor_list_call_takes_the_worker_spans_type():
    # torch 2.13 DDP over gloo: c10d::allreduce_ has Input Dims [[[N]]] typed "TensorList" (a
    # count without an element type); its gloo:all_reduce span on the worker thread has [[N]]
    # "float". The bucket is N x 4 bytes (was unknown).
    here = Path(__file__).parent.parent / "data" / "whatif_pairs" / "ddp_layers_x2"
    t = read_kineto(here / "rank0.kineto.json.gz")
    sizes = _rows(t, "all_reduce")
    assert len(sizes) == 12
    assert {r[2] for r in sizes} == {544768, 1055232, 1056768, 1057280}
    assert set(t.collectives.dtype) == {"float"}
