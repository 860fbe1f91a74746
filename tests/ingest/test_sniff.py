"""sniff_kind: a key counts where it is a key (quoted, then a colon), wherever in the head."""

from __future__ import annotations

import pytest

from lumos.ingest.detect import sniff_kind


@pytest.mark.parametrize(
    ("head", "kind"),
    [
        (b'{"traceEvents": []}', "kineto"),
        (b'{"a": "traceEvents", "traceEvents"\n\t : []}', "kineto"),
        (b'{"x": 1, "nodes": []}', "pytorch_et"),
        (b'{"schema" :"1.0.1"}', "pytorch_et"),
        (b'{"note": "traceEvents nodes schema", "other": "traceEvents"}', None),
        (b'  [{"ph": "X"}]', "kineto"),
        (b'{"nodes": [], "traceEvents": []}', "kineto"),
    ],
)
def test_sniff_kind(head: bytes, kind: str | None) -> None:
    assert sniff_kind(head) == kind
