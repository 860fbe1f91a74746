"""``read_chakra`` / ``write_chakra``: Chakra ``.et`` files <-> :class:`ChakraTrace`.

File format (MLCommons Chakra): a varint32 length and a ``GlobalMetadata`` message, then a
varint32 length and a ``Node`` message, repeated to the end of the file; no header. A
zero-length record is an empty message, not the end of the file. One file per rank, named
``<prefix>.<rank>.et``. Plain and gzip files are read (sniffed by content); a plain file is
memory-mapped, so a multi-GB trace is never held twice. Files are written plain by default
(ASTRA-sim's feeder cannot read gzip) and atomically.
"""

from __future__ import annotations

import gzip as _gzip
import os
import re
from pathlib import Path

import numpy as np

from lumos._io import atomic_write, is_gzip, read_bytes
from lumos.chakra import _wire
from lumos.chakra.attrs import WireError, read_varint, varint_bytes
from lumos.chakra.trace import ChakraMetadata, ChakraTrace, ChakraWorkload
from lumos.errors import ChakraFormatError, InputError, NoTracesError

__all__ = ["rank_files", "read_chakra", "write_chakra"]

_RANK_RE = re.compile(r"^(?P<prefix>.+)\.(?P<rank>\d+)\.et(?:\.gz)?$")
_CHUNK_NODES = 1 << 16


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


def _load(path: Path) -> np.ndarray:
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(2)
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None
    if size == 0:
        raise ChakraFormatError(path, "empty file: no GlobalMetadata record")
    if is_gzip(head):
        return np.frombuffer(read_bytes(path), dtype=np.uint8)
    return np.memmap(path, dtype=np.uint8, mode="r").view(np.ndarray)


def _rank_of(path: Path) -> int | None:
    m = _RANK_RE.match(path.name)
    return int(m["rank"]) if m else None


def _read_file(path: Path, rank: int | None = None) -> ChakraTrace:
    buf = _load(path)
    if buf.size == 0:
        raise ChakraFormatError(path, "empty file (after decompression): no GlobalMetadata record")
    err = np.zeros(4, dtype=np.int64)
    empty = np.zeros(0, dtype=np.int64)
    n_rec = _wire.scan_records(buf, 0, buf.size, False, empty, empty, err)
    _raise_scan(path, err)
    rec_off = np.empty(n_rec, dtype=np.int64)
    rec_len = np.empty(n_rec, dtype=np.int64)
    _wire.scan_records(buf, 0, buf.size, True, rec_off, rec_len, err)
    try:
        meta = ChakraMetadata.decode(buf[rec_off[0] : rec_off[0] + rec_len[0]].tobytes())
    except (WireError, UnicodeDecodeError) as exc:
        raise ChakraFormatError(path, f"GlobalMetadata record does not decode: {exc}") from None
    cols = _decode_nodes(path, buf, rec_off[1:], rec_len[1:])
    names, name_idx = _intern(path, buf, cols.pop("name_off"), cols.pop("name_len"),
                              cols.pop("name_hash"), "node name")  # fmt: skip
    attr_names, attr_name_idx = _intern(path, buf, cols.pop("attr_name_off"),
                                        cols.pop("attr_name_len"), cols.pop("attr_name_hash"),
                                        "attribute name")  # fmt: skip
    return ChakraTrace(
        metadata=meta,
        names=names,
        name_idx=name_idx,
        attr_names=attr_names,
        attr_name_idx=attr_name_idx,
        blob=buf,
        path=str(path),
        rank=_rank_of(path) if rank is None else rank,
        **cols,
    )


def _raise_scan(path: Path, err: np.ndarray) -> None:
    code, record, offset, extra = (int(x) for x in err)
    if code == _wire.E_OK:
        return
    what = "GlobalMetadata record" if record == 0 else f"record {record} (node row {record - 1})"
    detail = f"; it declares {extra} bytes" if code == _wire.E_LENGTH_PAST_EOF else ""
    raise ChakraFormatError(
        path,
        f"{_wire.ERROR_TEXT[code]} at byte {offset}, {what}{detail}; truncated or not a Chakra ET",
    )


def _peek_id(buf: np.ndarray, off: int, ln: int) -> int | None:
    b = buf[off : off + ln].tobytes()
    pos = 0
    try:
        while pos < len(b):
            tag, pos = read_varint(b, pos)
            if tag == 0x08:
                return read_varint(b, pos)[0]
            wt = tag & 7
            if wt == 0:
                pos = read_varint(b, pos)[1]
            elif wt == 2:
                n, pos = read_varint(b, pos)
                pos += n
            elif wt in (1, 5):
                pos += 8 if wt == 1 else 4
            else:
                return None
    except WireError:
        return None
    return None


def _alloc(n: int, n_ctrl: int, n_data: int, n_attr: int, n_unk: int) -> dict[str, np.ndarray]:
    """Column arrays in the argument order of ``_wire.decode_nodes``."""
    return {
        "node_id": np.empty(n, np.uint64),
        "name_off": np.empty(n, np.int64),
        "name_len": np.empty(n, np.int64),
        "name_hash": np.empty(n, np.uint64),
        "node_type": np.empty(n, np.int8),
        "start_time_micros": np.empty(n, np.uint64),
        "duration_micros": np.empty(n, np.uint64),
        "inputs_off": np.empty(n, np.int64),
        "inputs_len": np.empty(n, np.int64),
        "outputs_off": np.empty(n, np.int64),
        "outputs_len": np.empty(n, np.int64),
        "ctrl_ptr": np.empty(n + 1, np.int64),
        "ctrl_deps": np.empty(n_ctrl, np.uint64),
        "data_ptr": np.empty(n + 1, np.int64),
        "data_deps": np.empty(n_data, np.uint64),
        "attr_ptr": np.empty(n + 1, np.int64),
        "attr_off": np.empty(n_attr, np.int64),
        "attr_len": np.empty(n_attr, np.int64),
        "attr_name_off": np.empty(n_attr, np.int64),
        "attr_name_len": np.empty(n_attr, np.int64),
        "attr_name_hash": np.empty(n_attr, np.uint64),
        "attr_kind": np.empty(n_attr, np.int8),
        "attr_int": np.empty(n_attr, np.int64),
        "attr_float": np.empty(n_attr, np.float64),
        "unk_ptr": np.empty(n + 1, np.int64),
        "unk_off": np.empty(n_unk, np.int64),
        "unk_len": np.empty(n_unk, np.int64),
    }


def _decode_nodes(path: Path, buf: np.ndarray, rec_off: np.ndarray, rec_len: np.ndarray) -> dict:
    n = rec_off.shape[0]
    err = np.zeros(4, dtype=np.int64)
    counts = np.zeros(4, dtype=np.int64)
    dummy = _alloc(0, 0, 0, 0, 0)  # same dtypes as the fill pass: one compiled specialization
    _wire.decode_nodes(buf, rec_off, rec_len, False, counts, *dummy.values(), err)  # type: ignore[call-arg]
    _raise_node(path, buf, rec_off, rec_len, err)
    c = _alloc(n, *(int(x) for x in counts))
    _wire.decode_nodes(buf, rec_off, rec_len, True, counts, *c.values(), err)  # type: ignore[call-arg]
    _raise_node(path, buf, rec_off, rec_len, err)
    return c


def _raise_node(path: Path, buf: np.ndarray, rec_off, rec_len, err: np.ndarray) -> None:
    code, row, offset, fno = (int(x) for x in err)
    if code == _wire.E_OK:
        return
    node_id = _peek_id(buf, int(rec_off[row]), int(rec_len[row]))
    who = f"node id {node_id} (row {row})" if node_id is not None else f"node row {row}"
    raise ChakraFormatError(path, f"{who}, field {fno} at byte {offset}: {_wire.ERROR_TEXT[code]}")


def _intern(path, buf, off, ln, hashes, what) -> tuple[tuple[str, ...], np.ndarray]:
    if hashes.size == 0:
        return (), np.zeros(0, dtype=np.int32)
    uniq, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
    rep_off, rep_len = off[first], ln[first]
    if not _wire.same_strings(buf, off, ln, inverse, rep_off, rep_len):
        # a 64-bit hash collision: intern exactly (slow path, never seen in practice)
        table: dict[bytes, int] = {}
        idx = np.array(
            [
                table.setdefault(buf[o : o + n].tobytes(), len(table))
                for o, n in zip(off, ln, strict=True)
            ],
            dtype=np.int32,
        )
        raw_names = list(table)
    else:
        idx = inverse.astype(np.int32)
        raw_names = [buf[o : o + n].tobytes() for o, n in zip(rep_off, rep_len, strict=True)]
    names = []
    for k, raw in enumerate(raw_names):
        try:
            names.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            row = int(np.flatnonzero(idx == k)[0])
            raise ChakraFormatError(
                path, f"{what} of row {row} is not valid UTF-8: {raw[:40]!r}"
            ) from None
    del uniq
    return tuple(names), idx


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
    with atomic_write(path, "wb") as raw_f:
        f = _gzip.GzipFile(fileobj=raw_f, mode="wb", mtime=0) if gz else raw_f
        meta = trace.metadata.raw
        f.write(varint_bytes(len(meta)) + meta)
        for lo in range(0, trace.num_nodes, _CHUNK_NODES):
            hi = min(lo + _CHUNK_NODES, trace.num_nodes)
            out = _wire.encode_nodes(
                lo, hi, trace.node_id, trace.name_idx, names_blob, names_off, trace.node_type,
                trace.start_time_micros, trace.duration_micros, trace.blob,
                trace.inputs_off, trace.inputs_len, trace.outputs_off, trace.outputs_len,
                trace.ctrl_ptr, trace.ctrl_deps, trace.data_ptr, trace.data_deps,
                trace.attr_ptr, trace.attr_off, trace.attr_len,
                trace.unk_ptr, trace.unk_off, trace.unk_len,
            )  # fmt: skip
            f.write(out.data)
        if gz:
            f.close()
    return path
