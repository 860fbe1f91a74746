"""What ``read_chakra`` decodes on demand (metadata values, shared attribute views) equals what
an eager decode gives, on real files."""

from __future__ import annotations

import numpy as np
import pytest
from tests.realdata import TRACES, realdata

from lumos.chakra import attr, read_chakra
from lumos.chakra.attr_table import attrs_from_spans
from lumos.chakra.attrs import read_varint, varint_bytes
from lumos.chakra.metadata import ChakraMetadata
from lumos.convert import convert
from lumos.errors import ChakraFormatError


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """A real trace as ``lumos convert`` writes it (tables in the metadata, shared attributes)."""
    d = tmp_path_factory.mktemp("lazy")
    convert([realdata(TRACES["cuda_event_sync"])], d / "c", workers=1)
    return next(d.glob("c.*.et"))


def _eager(meta: ChakraMetadata):
    """The metadata attributes decoded the way every record was before: all at once."""
    raw, pos, off, ln = meta.raw, 0, [], []
    while pos < len(raw):
        tag, pos = read_varint(raw, pos)
        n, pos = read_varint(raw, pos)
        if tag == 0x12:
            off.append(pos)
            ln.append(n)
        pos += n
    return attrs_from_spans(np.frombuffer(raw, dtype=np.uint8), off, ln)


def test_lazy_metadata_equals_eager_decode(converted, chakra0_plain):
    for path in (converted, chakra0_plain):
        meta = read_chakra(path).metadata
        eager = _eager(meta)
        assert [a.name for a in eager] and meta.get(eager[-1].name) == eager[-1].value
        assert meta.attrs == eager
        assert meta == ChakraMetadata(meta.version, eager, meta.raw)
        assert hash(meta) == hash(ChakraMetadata(meta.version, eager, meta.raw))
    meta = read_chakra(converted).metadata
    assert meta.get("lumos_schema", "").startswith("lumos/") and meta.get("nope", 3) == 3


def test_metadata_value_that_does_not_decode_fails_when_read_naming_the_file(tmp_path):
    # an int64_list whose packed varint runs past its list: framing and header are fine
    bad = b"\x0a\x01x" + b"\x52\x03\x0a\x01\xff"
    good = ChakraMetadata.build("1", [attr("ok", 5)]).raw
    raw = good + b"\x12" + varint_bytes(len(bad)) + bad
    meta = ChakraMetadata.decode(raw, "m.0.et")
    assert meta.version == "1" and meta.get("ok") == 5
    with pytest.raises(ChakraFormatError, match=r"m\.0\.et: GlobalMetadata attribute 'x'"):
        meta.get("x")
    with pytest.raises(ChakraFormatError, match="does not decode"):
        _ = meta.attrs


def test_built_metadata_is_immutable():
    meta = ChakraMetadata.build("1", [attr("a", [1, 2])])
    assert ChakraMetadata.decode(meta.raw) == meta
    with pytest.raises(AttributeError):
        meta.version = "2"  # type: ignore[misc]


def test_views_equal_eager_attributes_on_every_node(converted, chakra0_plain):
    for path in (converted, chakra0_plain):
        t = read_chakra(path)
        n_views = 0
        for v in t.iter_nodes():
            eager = t.attrs_of(v.row)
            assert [(a.name, a.kind, a.value, a.doc_string) for a in v.attrs] == [
                (a.name, a.kind, a.value, a.doc_string) for a in eager
            ]
            assert (v.id, v.data_deps, v.ctrl_deps) == (
                int(t.node_id[v.row]),
                tuple(t.data_deps_of(v.row).tolist()),
                tuple(t.ctrl_deps_of(v.row).tolist()),
            )
            n_views += 1
        assert n_views == t.num_nodes


def test_a_dropped_trace_is_freed_without_a_garbage_collection(chakra0_plain):
    import gc
    import weakref

    gc.disable()
    try:
        t = read_chakra(chakra0_plain)
        views = list(t.iter_nodes())
        assert views[5].attrs[0].value is not None
        ref = weakref.ref(t)
        del t, views
        assert ref() is None  # no reference cycle through the views keeps it alive
    finally:
        gc.enable()
