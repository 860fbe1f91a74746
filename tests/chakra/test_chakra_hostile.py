"""Hostile Chakra input (issue #13): never hang, never exceed memory, never silently wrong.

Each case is a minimal file built here. The decoder is compiled (Cython): a hang in it ignores
``signal.alarm`` and Ctrl-C alike (signal handlers run only between Python bytecodes), and
pytest-timeout is not a dependency, so every read that once hung runs in a child process with a
deadline (:func:`_read_guarded`): a hang fails the test instead of stalling the suite.
"""

from __future__ import annotations

import gzip
import multiprocessing as mp
import queue
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from lumos.chakra import NodeType, attr, read_chakra, write_chakra
from lumos.chakra._wire import MAX_MICROS
from lumos.chakra.attrs import varint_bytes as _v
from lumos.chakra.builder import ChakraTraceBuilder
from lumos.chakra.mapping_foreign import foreign_graph
from lumos.chakra.stats import trace_stats
from lumos.chakra.trace import MISSING, exact_sum
from lumos.chakra.validate import validate_trace
from lumos.cli.main import main
from lumos.errors import ChakraFormatError, ConfigError, InputError, LumosError

DEADLINE_S = 120.0  # a hang, not a slow read: each file here decodes in milliseconds


def _rec(body: bytes) -> bytes:
    return _v(len(body)) + body


def _varint_field(fno: int, value: int) -> bytes:
    return _v(fno << 3) + _v(value)


def _len_field(fno: int, body: bytes) -> bytes:
    return _v(fno << 3 | 2) + _v(len(body)) + body


def _node(*fields: bytes) -> bytes:
    return _rec(b"".join(fields))


META = _rec(b"")  # an empty GlobalMetadata record


def _child(path: str, out: mp.Queue) -> None:
    try:
        t = read_chakra(path)
        out.put(("ok", int(t.num_nodes)))
    except Exception as exc:  # reported to the parent, which checks the type and message
        out.put((type(exc).__name__, str(exc)))


def _read_guarded(path: Path) -> tuple[str, object]:
    """``read_chakra(path)`` in a child process killed after ``DEADLINE_S``: ``("ok", nodes)``
    or ``(exception type name, message)``; a child that does not answer in time is a hang."""
    ctx = mp.get_context("fork" if sys.platform == "linux" else "spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_child, args=(str(path), out), daemon=True)
    proc.start()
    try:
        result = out.get(timeout=DEADLINE_S)
    except queue.Empty:
        proc.kill()
        proc.join()
        pytest.fail(f"read_chakra({path.name}) did not finish in {DEADLINE_S:.0f} s (hang)")
    proc.join(DEADLINE_S)
    if proc.exitcode not in (0, None):
        pytest.fail(f"read_chakra({path.name}) child died with exit code {proc.exitcode}")
    return result


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


# ---- 1. lengths of 2**63 or more must not move the parser backwards ------------------------
def test_name_length_of_2_pow_63_is_an_error_not_a_hang(tmp_path):
    data = META + _node(_varint_field(1, 1), _v(2 << 3 | 2) + _v(1 << 63) + b"abc")
    p = _write(tmp_path, "neglen.et", data)
    kind, msg = _read_guarded(p)
    assert kind == "ChakraFormatError", msg
    assert "neglen.et" in str(msg) and "node id 1" in str(msg) and "past the end" in str(msg)


@pytest.mark.parametrize("length", [1 << 63, (1 << 64) - 2, (1 << 64) - 11])
def test_attribute_name_length_that_wraps_negative_is_an_error(tmp_path, length):
    # (1 << 64) - 11 would jump back exactly onto the attribute's own tag: an endless loop
    attr = _v(1 << 3 | 2) + _v(length) + b"xx"
    p = _write(tmp_path, "negattr.et", META + _node(_varint_field(1, 1), _len_field(10, attr)))
    kind, msg = _read_guarded(p)
    assert kind == "ChakraFormatError" and "past the end" in str(msg), msg


def test_packed_deps_length_that_wraps_negative_is_an_error(tmp_path):
    p = _write(
        tmp_path, "negdeps.et", META + _node(_varint_field(1, 1), _v(5 << 3 | 2) + _v(1 << 63))
    )
    kind, msg = _read_guarded(p)
    assert kind == "ChakraFormatError" and "past the end" in str(msg), msg


def test_unknown_length_field_that_wraps_negative_is_an_error(tmp_path):
    p = _write(
        tmp_path, "negunk.et", META + _node(_varint_field(1, 1), _v(99 << 3 | 2) + _v(1 << 63))
    )
    kind, msg = _read_guarded(p)
    assert kind == "ChakraFormatError" and "past the end" in str(msg), msg


def test_varint_longer_than_10_bytes_is_named(tmp_path):
    p = _write(tmp_path, "long.et", META + _node(_v(1 << 3) + b"\xff" * 11 + b"\x01"))
    kind, msg = _read_guarded(p)
    assert kind == "ChakraFormatError" and "longer than 10 bytes" in str(msg), msg


# ---- 1. valid files with more deps or attributes than the first size estimate -------------
def _upstream_nodes(path: Path) -> list:
    pb = pytest.importorskip("chakra.schema.protobuf.et_def_pb2", reason="mlc-chakra not installed")
    raw = path.read_bytes()
    nodes, pos = [], 0
    from lumos.chakra.attrs import read_varint

    while pos < len(raw):
        n, pos = read_varint(raw, pos)
        nodes.append(raw[pos : pos + n])
        pos += n
    return [pb.Node.FromString(r) for r in nodes[1:]]


def _deps(ptr: np.ndarray, vals: np.ndarray, i: int) -> list[int]:
    return vals[ptr[i] : ptr[i + 1]].tolist()


def test_node_with_2000_deps_in_a_2_node_file(tmp_path):
    many = _len_field(5, b"".join(_v(1) for _ in range(2000)))
    p = _write(
        tmp_path, "deps.et", META + _node(_varint_field(1, 1)) + _node(_varint_field(1, 2), many)
    )
    assert _read_guarded(p) == ("ok", 2)
    t = read_chakra(p)
    assert _deps(t.data_ptr, t.data_deps, 1) == [1] * 2000
    up = _upstream_nodes(p)
    assert list(up[1].data_deps) == _deps(t.data_ptr, t.data_deps, 1)


def test_chain_of_5000_plus_a_node_depending_on_all(tmp_path):
    nodes = [_node(_varint_field(1, 1))]
    nodes += [_node(_varint_field(1, i), _len_field(4, _v(i - 1))) for i in range(2, 5001)]
    nodes.append(
        _node(_varint_field(1, 5001), _len_field(4, b"".join(_v(i) for i in range(1, 5001))))
    )
    p = _write(tmp_path, "chain.et", META + b"".join(nodes))
    assert _read_guarded(p) == ("ok", 5001)
    t = read_chakra(p)
    assert _deps(t.ctrl_ptr, t.ctrl_deps, 5000) == list(range(1, 5001))
    assert t.ctrl_ptr[-1] == 4999 + 5000
    up = _upstream_nodes(p)
    for i in (0, 1, 4999, 5000):
        assert list(up[i].ctrl_deps) == _deps(t.ctrl_ptr, t.ctrl_deps, i)


def test_node_with_4000_attributes(tmp_path):
    attrs = [_len_field(10, _len_field(1, b"a%d" % k) + _varint_field(9, k)) for k in range(4000)]
    p = _write(tmp_path, "attrs.et", META + _node(_varint_field(1, 1), *attrs))
    assert _read_guarded(p) == ("ok", 1)
    t = read_chakra(p)
    node = t.node(0)
    assert [(a.name, a.value) for a in node.attrs] == [(f"a{k}", k) for k in range(4000)]
    up = _upstream_nodes(p)
    assert [(a.name, a.int64_val) for a in up[0].attr] == [(a.name, a.value) for a in node.attrs]


# ---- 3. values the columns cannot hold are errors naming the node -----------------------
def test_node_type_beyond_int8_is_an_error(tmp_path):
    p = _write(tmp_path, "t260.et", META + _node(_varint_field(1, 7), _varint_field(3, 260)))
    with pytest.raises(ChakraFormatError, match=r"t260\.et: node id 7 .*node type 260 is not a"):
        read_chakra(p)


@pytest.mark.parametrize(("fno", "field"), [(6, "start_time_micros"), (7, "duration_micros")])
def test_micros_whose_nanoseconds_overflow_int64_are_an_error(tmp_path, fno, field):
    p = _write(tmp_path, "big.et", META + _node(_varint_field(1, 3), _varint_field(fno, 1 << 63)))
    with pytest.raises(ChakraFormatError, match=rf"node id 3 .*{field} 9223372036854775808 us"):
        read_chakra(p)
    ok = (2**63 - 1) // 1000  # the largest value that converts exactly
    p = _write(tmp_path, "max.et", META + _node(_varint_field(1, 3), _varint_field(fno, ok)))
    t = read_chakra(p)
    col = t.start_time_micros if fno == 6 else t.duration_micros
    assert int(col[0]) == ok


# ---- 2. gzip: bounded decompression, bombs refused by what no real trace has -------------
def _peak_bytes(fn) -> tuple[object, int]:
    """``(fn()'s result or exception, peak traced allocation)``; numpy allocations are traced."""
    tracemalloc.start()
    try:
        try:
            result: object = fn()
        except LumosError as exc:
            result = exc
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_2kb_gzip_of_empty_records_is_refused_in_bounded_memory(tmp_path):
    # 2 MiB of zero bytes: one empty GlobalMetadata record and 2 million empty Node records
    p = _write(tmp_path, "bomb.et.gz", gzip.compress(b"\0" * (2 << 20), 9))
    assert p.stat().st_size < 4096
    err, peak = _peak_bytes(lambda: read_chakra(p))
    assert isinstance(err, ChakraFormatError), err
    assert "bomb.et.gz" in str(err) and "2097151 of its 2097151 node records are empty" in str(err)
    assert peak < 32 << 20


def test_gzip_beyond_the_compression_ratio_is_refused_early(tmp_path, monkeypatch):
    # 100 gzip members of 1 MiB of zeros each (built fast): 100 MiB from about 100 KB
    p = _write(tmp_path, "ratio.et.gz", gzip.compress(b"\0" * (1 << 20), 9) * 100)
    err, peak = _peak_bytes(lambda: read_chakra(p))
    assert isinstance(err, InputError), err
    assert "ratio.et.gz" in str(err) and "more than 200 times" in str(err)
    assert "LUMOS_MAX_COMPRESSION_RATIO" in str(err)
    assert peak < 64 << 20  # refused near 16 MiB + 200 x 100 KB, not at 100 MiB
    monkeypatch.setenv("LUMOS_MAX_COMPRESSION_RATIO", "5000")  # raised: inflates, then the
    with pytest.raises(ChakraFormatError, match="node records are empty"):  # records decide
        read_chakra(p)
    monkeypatch.setenv("LUMOS_MAX_COMPRESSION_RATIO", "lots")
    with pytest.raises(ConfigError, match="LUMOS_MAX_COMPRESSION_RATIO='lots'"):
        read_chakra(p)


def _small_trace() -> bytes:
    return META + b"".join(_node(_varint_field(1, i), _len_field(2, b"n%d" % i)) for i in range(50))


def test_multi_member_gzip_with_zero_padding_reads_like_plain(tmp_path):
    raw = _small_trace()
    plain = read_chakra(_write(tmp_path, "p.et", raw))
    gz = gzip.compress(raw[:100]) + gzip.compress(raw[100:]) + b"\0" * 7
    t = read_chakra(_write(tmp_path, "m.et.gz", gz))
    assert t.node_id.tolist() == plain.node_id.tolist() and t.names == plain.names
    with pytest.raises(InputError, match="trailing bytes after the gzip stream"):
        read_chakra(_write(tmp_path, "g.et.gz", gz + b"junk"))
    with pytest.raises(InputError, match="truncated gzip"):
        read_chakra(_write(tmp_path, "t.et.gz", gz[: len(gz) // 2]))


def test_record_above_the_record_limit_names_the_setting(tmp_path, monkeypatch):
    p = _write(tmp_path, "rec.et", META + _node(_varint_field(1, 1), _len_field(2, b"x" * 300)))
    monkeypatch.setenv("LUMOS_MAX_RECORD_BYTES", "100")
    with pytest.raises(ChakraFormatError, match=r"rec\.et: record 1 .*declares 305 bytes.*limit "
                       r"of 100 bytes.*LUMOS_MAX_RECORD_BYTES"):  # fmt: skip
        read_chakra(p)
    monkeypatch.setenv("LUMOS_MAX_RECORD_BYTES", "1000")
    assert read_chakra(p).num_nodes == 1


@pytest.mark.parametrize(("n_empty", "n_full", "ok"), [(3, 3, True), (1024, 0, True),
                                                       (1025, 0, False), (1500, 1500, True),
                                                       (1501, 1500, False)])  # fmt: skip
def test_empty_node_records_are_nodes_up_to_a_bound(tmp_path, n_empty, n_full, ok):
    data = META + b"\0" * n_empty + b"".join(_node(_varint_field(1, i + 1)) for i in range(n_full))
    p = _write(tmp_path, "e.et", data)
    if ok:
        t = read_chakra(p)
        assert t.num_nodes == n_empty + n_full
        assert int((t.node_id == 0).sum()) == n_empty
    else:
        with pytest.raises(ChakraFormatError, match=rf"e\.et: {n_empty} of its .* are empty"):
            read_chakra(p)


# ---- 3./4. silently wrong values: named, exact, or refused ----------------------------------
def _comm_trace(size_attr):
    b = ChakraTraceBuilder(version="0.0.4")
    b.add_node(9, "ar", NodeType.COMM_COLL_NODE, duration_micros=5,
               attrs=[attr("is_cpu_op", False), attr("comm_type", 0), size_attr])  # fmt: skip
    return b.build()


def test_negative_comm_size_is_a_validation_error_and_a_counted_diagnostic(tmp_path):
    t = _comm_trace(attr("comm_size", -5))
    rep = validate_trace(t)
    assert [(p.kind, p.node_id, p.detail) for p in rep.errors] == [
        ("invalid_comm_size", 9, "comm_size -5")
    ]
    g = foreign_graph(t)
    assert g.diagnostics.count("comm_size_negative_as_0") == 1
    assert g.comms.size_bytes.tolist() == [0]
    assert main(["chakra", "validate", str(write_chakra(t, tmp_path / "n.et")[0])]) == 1


def test_uint64_comm_size_beyond_int64_is_exact_not_negative():
    t = _comm_trace(attr("comm_size", 2**64 - 1, "uint64_val"))
    assert t.comm.out_of_range == ((0, "comm_size", 2**64 - 1),)
    assert int(t.comm.comm_size[0]) == MISSING  # never the wrapped -1
    kinds = {p.kind: p.detail for p in validate_trace(t).errors}
    assert kinds["out_of_range_attr"] == f"comm_size = {2**64 - 1} does not fit int64"
    g = foreign_graph(t)
    assert g.diagnostics.count("comm_attr_beyond_int64_ignored") == 1
    ok = _comm_trace(attr("comm_size", 2**63 - 1, "uint64_val"))
    assert int(ok.comm.comm_size[0]) == 2**63 - 1 and ok.comm.out_of_range == ()


def test_node_ids_of_2_pow_64_minus_1_stay_exact(tmp_path):
    top = 2**64 - 1
    data = META + _node(_varint_field(1, top)) + _node(_varint_field(1, 5), _len_field(5, _v(top)))
    data += _node(_varint_field(1, 6), _len_field(5, _v(top - 1)))  # names no node
    t = read_chakra(_write(tmp_path, "ids.et", data))
    assert t.node_id.tolist() == [top, 5, 6] and t.data_deps.tolist() == [top, top - 1]
    assert t.index_of([top, top - 1]).tolist() == [0, -1]
    dang = [p.detail for p in validate_trace(t).errors if p.kind == "dangling_data_dep"]
    assert dang == [f"depends on id {top - 1}, which no node has"]
    write_chakra(t, tmp_path / "o.et")
    assert (tmp_path / "o.et").read_bytes() == data


def test_cli_validate_refuses_node_type_260_instead_of_reading_comp(tmp_path, capsys):
    p = _write(tmp_path, "t.et", META + _node(_varint_field(1, 7), _varint_field(3, 260)))
    assert main(["chakra", "validate", str(p), "--fix", str(tmp_path / "f.et")]) == 1
    err = capsys.readouterr().err
    assert "node type 260" in err and "Traceback" not in err
    assert not (tmp_path / "f.et").exists()


def test_durations_that_sum_past_int64_are_exact_in_stats_and_refused_for_the_path():
    b = ChakraTraceBuilder(version="0.0.4")
    for i in range(2000):
        b.add_node(i + 1, "k", NodeType.COMP_NODE, duration_micros=MAX_MICROS)
    t = b.build()
    assert exact_sum(t.duration_micros) == 2000 * MAX_MICROS
    with pytest.raises(ChakraFormatError, match="durations add up to 2\\*\\*63 us or more"):
        trace_stats(t)
    b = ChakraTraceBuilder(version="0.0.4")
    b.add_node(1, "k", NodeType.COMP_NODE, duration_micros=MAX_MICROS + 1)
    with pytest.raises(ChakraFormatError, match="node id 1: duration_micros 9223372036854776 us"):
        foreign_graph(b.build())


def test_metadata_attribute_list_past_its_message_is_an_error_not_truncated(tmp_path):
    bad_attr = _len_field(1, b"a") + _v(10 << 3 | 2) + _v(50) + _varint_field(1, 1)
    p = _write(tmp_path, "md.et", _rec(_len_field(2, bad_attr)) + _node(_varint_field(1, 1)))
    with pytest.raises(ChakraFormatError, match=r"md\.et: GlobalMetadata .*list runs past"):
        read_chakra(p)
