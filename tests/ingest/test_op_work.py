"""Work of an op from its recorded shapes (``lumos.ingest.op_work``): hand-computed values, and
the shapes a real trace records (``alltoall_4streams``)."""

from __future__ import annotations

import pytest
from tests.realdata import trace

from lumos.ingest.kineto import read_kineto
from lumos.ingest.op_work import op_work


@pytest.mark.parametrize(
    ("name", "dims", "types", "expected"),
    [
        # addmm(bias[512], a[1024,1705], b[1705,512]) as control.json records it
        ("aten::addmm", [[512], [1024, 1705], [1705, 512], [], []],
         ["float", "float", "float", "Scalar", "Scalar"],
         (2 * 1024 * 1705 * 512, 4 * (1024 * 1705 + 1705 * 512 + 1024 * 512))),
        ("aten::bmm", [[1024, 96, 50], [1024, 50, 8]], ["float", "float"],
         (2 * 1024 * 96 * 50 * 8, 4 * (1024 * 96 * 50 + 1024 * 50 * 8 + 1024 * 96 * 8))),
        ("aten::mm", [[10, 1000], [1000, 512]], ["c10::BFloat16", "c10::BFloat16"],
         (2 * 10 * 1000 * 512, 2 * (10 * 1000 + 1000 * 512 + 10 * 512))),
        # q[2,8,128,64], k/v[2,8,256,64]: QK^T and PV, 2*B*H*L*S*(D+Dv)
        ("aten::_scaled_dot_product_flash_attention",
         [[2, 8, 128, 64], [2, 8, 256, 64], [2, 8, 256, 64], [], []],
         ["c10::Half"] * 3 + ["Scalar", "Scalar"],
         (2 * 2 * 8 * 128 * 256 * 128, 2 * (2 * 8 * 128 * 64 + 2 * 2 * 8 * 256 * 64))),
        ("aten::_scaled_dot_product_flash_attention_backward",
         [[2, 8, 128, 64], [2, 8, 128, 64], [2, 8, 256, 64], [2, 8, 256, 64]],
         ["c10::Half"] * 4,
         (2 * 2 * 8 * 128 * 256 * 128 * 5 // 2, 2 * (2 * 8 * 128 * 64 + 2 * 2 * 8 * 256 * 64))),
        # not understood: mismatched inner dims, unknown dtype, another op, no shapes
        ("aten::mm", [[10, 3], [4, 5]], ["float", "float"], (0, 0)),
        ("aten::copy_", [[4], [4], []], ["weird", "float", "Scalar"], (0, 0)),
        ("aten::relu", [[4]], ["float"], (0, 0)),
        ("aten::mm", None, None, (0, 0)),
    ],
)  # fmt: skip
def test_op_work(name, dims, types, expected):
    assert op_work(name, dims, types) == expected


def test_shapes_kept_at_ingest():
    t = read_kineto(trace("alltoall_4streams"))
    names = {t.names[int(t.events.name_idx[r])] for r in t.op_work}
    assert names == {"aten::mm", "aten::addmm", "aten::bmm", "aten::copy_"}
    counts = {n: 0 for n in names}
    for r in t.op_work:
        counts[t.names[int(t.events.name_idx[r])]] += 1
    # 30 of the 444 copies move empty tensors ([[0], [0], []], [[8, 0], ...]): no work
    assert counts == {"aten::mm": 1092, "aten::addmm": 594, "aten::bmm": 90, "aten::copy_": 414}
