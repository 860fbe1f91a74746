"""read_pytorch_et on real ETs of every schema version: columns, comm table, summary."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest
from tests.realdata import trace

from lumos import HostTrace, read_pytorch_et
from lumos.errors import TraceFormatError
from lumos.ingest.et_summary import summarize_et

# phenomenon names of tests/realdata.py: real ETs in four schema versions, read in place
SIMPLE_ADD = "simple_add_et"  # 1.0.1
CHAKRA_102 = "et_1.0.2"
RESNET_110 = "et_1.1.0"
PT2_111 = "et_1.1.1"
DLRM_ET = "dlrm_et_8rank"


@pytest.mark.parametrize(
    ("name", "schema", "num_nodes"),
    [
        (SIMPLE_ADD, "1.0.1", 38),
        (CHAKRA_102, "1.0.2-chakra.0.0.4", 263),
        (RESNET_110, "1.1.0-chakra.0.0.4", 14392),
        (PT2_111, "1.1.1-chakra.0.0.4", 20),
    ],
)
def test_every_schema_version_loads(name: str, schema: str, num_nodes: int) -> None:
    t = read_pytorch_et(trace(name))
    assert isinstance(t, HostTrace)
    assert (t.schema, t.num_nodes) == (schema, num_nodes)
    assert np.all(np.diff(t.node_id) > 0)
    assert not t.diagnostics
    for col in ("rf_id", "tid", "fw_parent", "seq_id", "scope", "op_schema"):
        assert col in t.fields_present
    # Exactly one root: the "[pytorch|profiler|execution_*|process]" node, its own parent.
    roots = np.flatnonzero(t.parent_idx < 0)
    assert [t.name(i) for i in roots] in (
        ["[pytorch|profiler|execution_trace|process]"],
        ["[pytorch|profiler|execution_graph|process]"],
    )


def test_simple_add_columns_and_io() -> None:
    t = read_pytorch_et(trace(SIMPLE_ADD))
    assert (t.pid, t.time) == (563677, "2023-07-14 11:53:07")
    assert (t.start_ts_ns, t.finish_ts_ns) == (6278907328000, 6278928026000)
    i = t.index_of(13)
    assert t.name(i) == "aten::uniform_"
    assert (t.rf_id[i], t.tid[i], t.node_id[t.parent_idx[i]]) == (7, 1, 9)
    assert t.op_schemas[t.op_schema_idx[i]].startswith("aten::uniform_(Tensor(a!) self")
    ins = t.inputs(i)
    assert ins.values == [[11, 12, 0, 65536, 4, "cuda:0"], 0.0, 1.0, "<None>"]
    assert ins.shapes == [[256, 256], [], [], []]
    assert ins.types == ["Tensor(float)", "Double", "Double", "None"]
    assert t.outputs(i).types == ["Tensor(float)"]
    with pytest.raises(KeyError):
        t.index_of(7)


def test_newer_layout_io_and_extra_attrs() -> None:
    t = read_pytorch_et(trace(PT2_111))
    i = t.index_of(16)
    assert t.name(i) == "triton_poi_fused_add_cos_neg_sin_0"
    ins = t.inputs(i)
    assert ins.types[:4] == ["Tensor(float)"] * 4
    assert ins.shapes[0] == [4, 4]
    assert ins.strides is not None and ins.strides[0] == [4, 1]
    assert "kernel_backend" in t.extra_attrs
    assert set(t.extra_attrs["kernel_backend"].values()) >= {"triton"}


def test_comm_table_from_attrs_110() -> None:
    t = read_pytorch_et(trace(RESNET_110))
    c = t.comm
    names = [c.collective(r) for r in range(len(c))]
    assert names.count("allreduce") == 15
    assert names.count("broadcast") == 6
    r = names.index("broadcast")
    assert (c.pg_name(r), c.strings[c.pg_desc_idx[r]], c.seq[r]) == ("0", "default_pg", 33)
    assert (c.in_nelems[r], c.elem_size_bytes[r], c.in_size_bytes[r]) == (53120, 4, 212480)
    assert c.group_ranks(r) == [0, 1]
    assert t.name(c.node_idx[r]) == "record_param_comms"


def test_comm_table_positional_101() -> None:
    t = read_pytorch_et(trace(DLRM_ET), member="dlrm_pytorch_et/dlrm_eg_2.json")
    c = t.comm
    names = [c.collective(r) for r in range(len(c))]
    assert sorted(set(names)) == ["all_to_all", "all_to_allv", "allreduce", "wait"]
    assert len(names) - names.count("wait") == 8  # 5 all_to_all(v) + 3 allreduce
    r = names.index("all_to_allv")
    assert (c.seq[r], c.rank[r], c.in_nelems[r], c.out_nelems[r]) == (147, 2, 6144, 6144)
    split = c.in_split[c.in_split_ptr[r] : c.in_split_ptr[r + 1]]
    assert split.tolist() == [768] * 8
    assert c.pg_name(r) == ""  # 1.0.1 records an opaque pointer, not a name
    r = names.index("allreduce")
    assert (c.in_nelems[r], c.elem_size_bytes[r]) == (394241, 4)


def test_comm_table_102_all_gather() -> None:
    c = read_pytorch_et(trace(CHAKRA_102)).comm
    names = [c.collective(r) for r in range(len(c))]
    assert names.count("all_gather") == 10
    r = names.index("all_gather")
    assert (c.in_nelems[r], c.out_nelems[r], c.group_size[r]) == (1, 2, 2)


def test_dlrm_all_ranks_load_from_tar_members() -> None:
    archive = trace(DLRM_ET)
    with tarfile.open(archive) as tar:
        members = sorted(m.name for m in tar.getmembers() if m.name.endswith(".json"))
    assert len(members) == 8
    for m in members:
        t = read_pytorch_et(archive, member=m)
        assert t.path.endswith(m)
        assert t.schema == "1.0.1"
        assert 1670 <= t.num_nodes <= 1680


def test_tar_with_several_members_needs_a_name() -> None:
    with pytest.raises(TraceFormatError, match="8 JSON members"):
        read_pytorch_et(trace(DLRM_ET))


def test_tar_with_one_member_is_picked(tmp_path: Path) -> None:
    payload = gzip.decompress(trace(SIMPLE_ADD).read_bytes())
    out = tmp_path / "one.tar.gz"
    with tarfile.open(out, "w:gz") as tar:
        info = tarfile.TarInfo("dir/et.json")
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    t = read_pytorch_et(out)
    assert t.num_nodes == 38
    assert t.path.endswith("one.tar.gz::dir/et.json")


def test_summary_resnet_110() -> None:
    s = summarize_et(read_pytorch_et(trace(RESNET_110)))
    assert s["kind"] == "pytorch_et"
    assert s["schema"] == "1.1.0-chakra.0.0.4"
    assert s["num_nodes"] == 14392
    assert s["top_ops"][0] == {"name": "aten::empty", "count": 1590}
    assert s["comm_nodes"] == {
        "c10d::allreduce_": 15,
        "c10d::broadcast_": 6,
        "nccl:all_reduce": 15,
        "nccl:broadcast": 6,
        "record_param_comms": 27,
    }
    assert {k: v["count"] for k, v in s["collectives"].items()} == {"allreduce": 15, "broadcast": 6}
    assert s["pg_names"] == ["0"]
    assert s["process_groups"][0]["pg_desc"] == "default_pg"
    assert [th["tid"] for th in s["threads"]] == [0, 1, 2]
    json.dumps(s)  # plain JSON types only
