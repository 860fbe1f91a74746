"""``read_chakra`` / ``write_chakra``: Chakra ``.et`` files <-> :class:`ChakraTrace`.

File format (MLCommons Chakra): a varint32 length and a ``GlobalMetadata`` message, then a
varint32 length and a ``Node`` message, repeated to the end of the file; no header. A
zero-length record is an empty message, not the end of the file. One file per rank, named
``<prefix>.<rank>.et``. Plain and gzip files are read (sniffed by content); a plain file is
memory-mapped, so a multi-GB trace is never held twice. Files are written plain by default
(ASTRA-sim's feeder cannot read gzip) and atomically.

Hostile input (issue #13) is refused by what no real trace has, never by total size (multi-GB
traces are normal). Each limit is an environment variable, read when a file is read:

==============================  ===========  ==================================================
variable                        default      refuses
==============================  ===========  ==================================================
``LUMOS_MAX_COMPRESSION_RATIO`` 200          a gzip file that inflates to more than this many
                                             times its size (real Chakra traces: 13-30:1), as
                                             soon as it does so (judged past 16 MiB of output),
                                             so a decompression bomb is never held in memory
``LUMOS_MAX_RECORD_BYTES``      268435456    one record (GlobalMetadata or Node) longer than
                                             this (256 MiB; real nodes are well under 1 KiB)
==============================  ===========  ==================================================

Empty Node records (length 0: a node with id 0, no name and type INVALID) are read as such,
but a file with more of them than both 1,024 and its non-empty node records is refused: no real
trace holds them, and a few bytes of gzip would otherwise become millions of nodes.
"""

from __future__ import annotations

import gzip as _gzip
import os
import re
import zlib
from pathlib import Path

import numpy as np

from lumos._io import atomic_write, is_gzip
from lumos.chakra import _wire
from lumos.chakra.attrs import WireError, read_varint, varint_bytes
from lumos.chakra.io_nodes import decode_node_records, decoded_names
from lumos.chakra.trace import ChakraMetadata, ChakraTrace, ChakraWorkload
from lumos.errors import ChakraFormatError, ConfigError, InputError, NoTracesError

__all__ = ["rank_files", "read_chakra", "write_chakra"]

_RANK_RE = re.compile(r"^(?P<prefix>.+)\.(?P<rank>\d+)\.et(?:\.gz)?$")
_CHUNK_NODES = 1 << 16

RATIO_ENV, RATIO_DEFAULT = "LUMOS_MAX_COMPRESSION_RATIO", 200.0
RECORD_ENV, RECORD_DEFAULT = "LUMOS_MAX_RECORD_BYTES", 256 << 20
_RATIO_GRACE = 16 << 20  # output below this is never judged: small files compress oddly
_EMPTY_NODES_FREE = 1024
_IN_CHUNK, _OUT_CHUNK = 1 << 20, 4 << 20


def rank_files(path: str | os.PathLike[str]) -> tuple[str, dict[int, Path]]:
    """``(prefix, {rank: file})`` for a directory or a ``<prefix>`` of ``<prefix>.<rank>.et`` files.

    Raises :class:`NoTracesError` when nothing matches, :class:`InputError` when a directory
    holds files of several prefixes (pass the prefix to choose one).
    """
    p = Path(path)
    if p.is_dir():
        folder, want = p, None
    else:
        folder, want = p.parent if str(p.parent) else Path("."), p.name
    found: dict[str, dict[int, Path]] = {}
    if folder.is_dir():
        for f in sorted(folder.iterdir()):
            m = _RANK_RE.match(f.name)
            if m and f.is_file() and (want is None or m["prefix"] == want):
                found.setdefault(m["prefix"], {})[int(m["rank"])] = f
    if not found:
        if not p.exists():
            raise NoTracesError(p, f"no such file, and no {p.name}.<rank>.et files beside it")
        raise NoTracesError(p, "no Chakra files named <prefix>.<rank>.et found")
    if len(found) > 1:
        names = ", ".join(sorted(found))
        raise InputError(p, f"holds Chakra files of several prefixes ({names}); pass one prefix")
    prefix, files = next(iter(found.items()))
    return str(folder / prefix), dict(sorted(files.items()))


def read_chakra(path_or_dir: str | os.PathLike[str]) -> ChakraTrace | ChakraWorkload:
    """Read one ``.et`` file (-> :class:`ChakraTrace`) or all ranks of a directory or
    ``<prefix>`` (-> :class:`ChakraWorkload`).

    Every decoding problem raises :class:`~lumos.errors.ChakraFormatError` naming the file, the
    byte offset and, when known, the node id.
    """
    p = Path(path_or_dir)
    if p.is_file():
        return _read_file(p)
    prefix, files = rank_files(p)
    return ChakraWorkload({r: _read_file(f, rank=r) for r, f in files.items()}, prefix)


#: Files smaller than this are read whole; bigger ones memory-mapped (a map costs more to set up
#: than a small file costs to read: ASTRA-sim's example workloads are a few KB a rank).
_MAP_MIN_BYTES = 1 << 20


def _load(path: Path) -> np.ndarray:
    try:
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            small = f.read() if size < _MAP_MIN_BYTES else f.read(2)
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None
    if size == 0:
        raise ChakraFormatError(path, "empty file: no GlobalMetadata record")
    if is_gzip(small):
        buf = np.frombuffer(_gunzip(path, _limit(RATIO_ENV, RATIO_DEFAULT)), dtype=np.uint8)
        buf.flags.writeable = False  # as a mapped or read file: one compiled decoder for all
        return buf
    if size < _MAP_MIN_BYTES:
        return np.frombuffer(small, dtype=np.uint8)
    return np.memmap(path, dtype=np.uint8, mode="r").view(np.ndarray)


def _limit(env: str, default: float) -> float:
    """The positive number in environment variable ``env``, else ``default``."""
    text = os.environ.get(env, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ConfigError(f"{env}={text!r} is not a positive number")
    return value


def _gunzip(path: Path, max_ratio: float) -> bytearray:
    """The decompressed content of the gzip file ``path`` (all members), inflated a bounded
    chunk at a time and refused as soon as it grows past ``max_ratio`` times the bytes read."""
    out = bytearray()
    n_in = 0
    d: zlib._Decompress | None = zlib.decompressobj(wbits=31)
    pending = b""
    try:
        with path.open("rb") as f:
            while True:
                if d is None:  # between members: zero padding, another member or garbage
                    pending = pending.lstrip(b"\0")
                if len(pending) < (2 if d is None else 1):
                    more = f.read(_IN_CHUNK)
                    n_in += len(more)
                    pending += more
                    if more:
                        continue
                    if d is None:  # end of file
                        if pending:
                            raise InputError(path, "trailing bytes after the gzip stream")
                        break
                    out += d.flush()  # what inflate held back (at most one match)
                    if not d.eof:
                        raise InputError(path, "truncated gzip stream (file ends early)")
                    pending, d = d.unused_data, None
                    continue
                if d is None:
                    if not is_gzip(pending):
                        raise InputError(path, "trailing bytes after the gzip stream")
                    d = zlib.decompressobj(wbits=31)
                out += d.decompress(pending, _OUT_CHUNK)
                pending = d.unconsumed_tail
                if d.eof:  # everything after the member is in unused_data; unconsumed_tail
                    # may hold a stale copy of it (CPython keeps it after an output-limited call)
                    pending, d = d.unused_data, None
                if len(out) > _RATIO_GRACE and len(out) > max_ratio * max(n_in, 1):
                    raise InputError(
                        path,
                        f"gzip inflates more than {max_ratio:g} times its size (already "
                        f"{len(out)} bytes from {n_in}; real Chakra traces compress 13-30:1): "
                        f"refused as a decompression bomb; set {RATIO_ENV} higher to read it",
                    )
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None
    except zlib.error as exc:
        raise InputError(path, f"corrupt gzip data: {exc}") from None
    return out


def _rank_of(path: Path) -> int | None:
    m = _RANK_RE.match(path.name)
    return int(m["rank"]) if m else None


def _read_file(path: Path, rank: int | None = None) -> ChakraTrace:
    buf = _load(path)
    if buf.size == 0:
        raise ChakraFormatError(path, "empty file (after decompression): no GlobalMetadata record")
    err = np.zeros(7, dtype=np.int64)
    empty = np.zeros(0, dtype=np.int64)
    max_rec = int(_limit(RECORD_ENV, RECORD_DEFAULT))
    n_rec = _wire.scan_records(buf, 0, buf.size, max_rec, False, empty, empty, err)
    _raise_scan(path, err, max_rec)
    n_empty = int(err[4])
    if n_empty > _EMPTY_NODES_FREE and n_empty > n_rec - 1 - n_empty:
        raise ChakraFormatError(
            path,
            f"{n_empty} of its {n_rec - 1} node records are empty (zero-length: id 0, no name, "
            f"type INVALID), which no real trace holds; refused as corrupt or a decompression "
            f"bomb (at most {_EMPTY_NODES_FREE}, or as many as the non-empty node records)",
        )
    meta_len, pos = read_varint(buf[:10].tobytes(), 0)
    try:
        meta = ChakraMetadata.decode(buf[pos : pos + meta_len].tobytes(), str(path))
    except (WireError, UnicodeDecodeError) as exc:
        raise ChakraFormatError(path, f"GlobalMetadata record does not decode: {exc}") from None
    c = decode_node_records(path, buf, pos + meta_len, n_rec - 1, err)
    (node_id, name_idx, node_type, start_us, dur_us, inp_off, inp_len, out_off, out_len,
     ctrl_ptr, ctrl_deps, data_ptr, data_deps, attr_ptr, attr_off, attr_len, attr_name_idx,
     attr_kind, attr_int, attr_float, unk_ptr, unk_off, unk_len, name_rep,
     attr_name_rep) = c  # fmt: skip
    return ChakraTrace(
        metadata=meta,
        node_id=node_id,
        name_idx=name_idx,
        names=decoded_names(path, buf, name_rep, name_idx, "node name"),
        node_type=node_type,
        ctrl_ptr=ctrl_ptr,
        ctrl_deps=ctrl_deps,
        data_ptr=data_ptr,
        data_deps=data_deps,
        start_time_micros=start_us,
        duration_micros=dur_us,
        blob=buf,
        inputs_off=inp_off,
        inputs_len=inp_len,
        outputs_off=out_off,
        outputs_len=out_len,
        attr_ptr=attr_ptr,
        attr_off=attr_off,
        attr_len=attr_len,
        attr_name_idx=attr_name_idx,
        attr_names=decoded_names(path, buf, attr_name_rep, attr_name_idx, "attribute name"),
        attr_kind=attr_kind,
        attr_int=attr_int,
        attr_float=attr_float,
        unk_ptr=unk_ptr,
        unk_off=unk_off,
        unk_len=unk_len,
        path=str(path),
        rank=_rank_of(path) if rank is None else rank,
    )


def _raise_scan(path: Path, err: np.ndarray, max_rec: int) -> None:
    code, record, offset, extra = (int(x) for x in err[:4])
    if code == _wire.E_OK:
        return
    what = "GlobalMetadata record" if record == 0 else f"record {record} (node row {record - 1})"
    if code == _wire.E_RECORD_LIMIT:
        raise ChakraFormatError(
            path,
            f"{what} at byte {offset} declares {extra} bytes, above the limit of {max_rec} "
            f"bytes per record; set {RECORD_ENV} higher if the file is genuine",
        )
    detail = f"; it declares {extra} bytes" if code == _wire.E_LENGTH_PAST_EOF else ""
    raise ChakraFormatError(
        path,
        f"{_wire.ERROR_TEXT[code]} at byte {offset}, {what}{detail}; truncated or not a Chakra ET",
    )


def write_chakra(
    data: ChakraTrace | ChakraWorkload, path: str | os.PathLike[str], *, gzip: bool = False
) -> list[Path]:
    """Write a trace to ``path``, or a workload to ``<path>.<rank>.et`` per rank; returns the files.

    Each file is written atomically. Records are written in canonical protobuf order (the order
    the protobuf library uses), so a file written by it and read here is reproduced byte for byte.
    """
    if isinstance(data, ChakraWorkload):
        suffix = ".et.gz" if gzip else ".et"
        return [_write_file(t, Path(f"{path}.{t.rank}{suffix}"), gzip) for t in data]
    return [_write_file(data, Path(path), gzip)]


def _write_file(trace: ChakraTrace, path: Path, gz: bool) -> Path:
    names_raw = [s.encode("utf-8") for s in trace.names]
    names_off = np.zeros(len(names_raw) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in names_raw], out=names_off[1:])
    names_blob = (
        np.frombuffer(b"".join(names_raw), dtype=np.uint8) if names_raw else np.zeros(1, np.uint8)
    )
    # the encoder's arrays, C-contiguous in its dtypes (copies only where a trace has others)
    u8, i32, i64, u64 = np.uint8, np.int32, np.int64, np.uint64
    t = trace
    node_cols = tuple(np.ascontiguousarray(a, dtype=dt) for a, dt in (
        (t.node_id, u64), (t.name_idx, i32), (names_blob, u8), (names_off, i64),
        (t.node_type, np.int8), (t.start_time_micros, u64), (t.duration_micros, u64),
        (t.blob, u8), (t.inputs_off, i64), (t.inputs_len, i64), (t.outputs_off, i64),
        (t.outputs_len, i64), (t.ctrl_ptr, i64), (t.ctrl_deps, u64), (t.data_ptr, i64),
        (t.data_deps, u64), (t.attr_ptr, i64), (t.attr_off, i64), (t.attr_len, i64),
        (t.unk_ptr, i64), (t.unk_off, i64), (t.unk_len, i64),
    ))  # fmt: skip
    with atomic_write(path, "wb") as raw_f:
        f = _gzip.GzipFile(fileobj=raw_f, mode="wb", mtime=0) if gz else raw_f
        meta = trace.metadata.raw
        f.write(varint_bytes(len(meta)) + meta)
        for lo in range(0, trace.num_nodes, _CHUNK_NODES):
            hi = min(lo + _CHUNK_NODES, trace.num_nodes)
            f.write(_wire.encode_nodes(lo, hi, *node_cols).data)
        if gz:
            f.close()
    return path
