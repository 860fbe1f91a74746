"""Converted ETs load in mlc-chakra's reader (test-only dependency) with the same content."""

from __future__ import annotations

import numpy as np
import pytest
from tests.realdata import SIMPLE_ADD_DIR, TRACES, realdata

from lumos.chakra import read_chakra
from lumos.convert import convert

pytest.importorskip(
    "chakra.schema.protobuf.et_def_pb2",
    reason="mlc-chakra not installed (pip install --no-deps mlc-chakra) - upstream interop skipped",
)
from test_chakra_interop import _upstream_read


@pytest.mark.parametrize(
    "source", [SIMPLE_ADD_DIR, TRACES["cuda_event_sync"]], ids=["simple_add", "cuda_event_sync"]
)
def test_upstream_reader_loads_converted_files(source, tmp_path):
    convert([realdata(source)], tmp_path / "c", workers=1)
    (path,) = tmp_path.glob("c.*.et")
    ours = read_chakra(path)
    meta, nodes = _upstream_read(path)
    assert meta.version == "0.0.4"
    assert any(a.name == "lumos_schema" for a in meta.attr)
    assert len(nodes) == ours.num_nodes
    for i, n in enumerate(nodes):
        assert n.id == int(ours.node_id[i])
        assert n.type == int(ours.node_type[i])
        assert n.duration_micros == int(ours.duration_micros[i])
        assert list(n.data_deps) == ours.data_deps_of(i).astype(np.int64).tolist()
        attrs = {a.name: a for a in n.attr}
        assert [a.name for a in n.attr] == [a.name for a in ours.attrs_of(i)]
        if "is_cpu_op" in attrs:
            assert attrs["is_cpu_op"].bool_val == bool(ours.comm.is_cpu_op[i])
