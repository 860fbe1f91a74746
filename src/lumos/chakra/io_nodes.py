"""The node records of a Chakra file decoded into columns: the driver of the one-pass decoder
(:func:`lumos.chakra._wire.decode_nodes`), which grows the decoder's arrays when it asks and
trims them after, and the error a malformed node raises, naming the node by its id when the
record still says it. Used by :func:`lumos.chakra.io.read_chakra`."""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn

import numpy as np

from lumos._intern import grow_table, new_table
from lumos.chakra import _wire
from lumos.chakra.attrs import WireError, read_varint
from lumos.errors import ChakraFormatError

__all__ = ["decode_node_records", "decoded_names"]


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


# (name, dtype) of decode_nodes' arrays after the state: per node, then per repeated item
_NODE_COLS = (("node_id", np.uint64), ("name_idx", np.int32), ("node_type", np.int8),
              ("start", np.uint64), ("dur", np.uint64), ("inp_off", np.int64),
              ("inp_len", np.int64), ("out_off", np.int64), ("out_len", np.int64))  # fmt: skip
_GROUPS = {  # GROW_* code -> (pointer column, item columns)
    _wire.GROW_CTRL: ("ctrl_ptr", (("ctrl", np.uint64),)),
    _wire.GROW_DATA: ("data_ptr", (("data", np.uint64),)),
    _wire.GROW_ATTR: ("attr_ptr", (("attr_off", np.int64), ("attr_len", np.int64),
                                   ("attr_name", np.int32), ("attr_kind", np.int8),
                                   ("attr_int", np.int64), ("attr_float", np.float64))),
    _wire.GROW_UNK: ("unk_ptr", (("unk_off", np.int64), ("unk_len", np.int64))),
}  # fmt: skip
_COUNTER = {_wire.GROW_CTRL: _wire.ST_CTRL, _wire.GROW_DATA: _wire.ST_DATA,
            _wire.GROW_ATTR: _wire.ST_ATTR, _wire.GROW_UNK: _wire.ST_UNK}  # fmt: skip


def decode_node_records(path: Path, buf: np.ndarray, pos: int, n: int, err: np.ndarray) -> list:
    """Run the one-pass decoder, growing its arrays when it asks; returns the columns trimmed
    to size, in ``_read_file``'s unpacking order, then the two interned-name span arrays."""
    cols: dict[str, np.ndarray] = {name: np.empty(n, dt) for name, dt in _NODE_COLS}
    total = max(buf.size - pos, 1)
    # a small first guess (the first regrowth extrapolates), but room for every item of a
    # small file (an item takes 2 bytes or more): a regrowth costs a second call
    guess = min(max(n, total // 2 + 1), 4096)
    for code, (ptr, items) in _GROUPS.items():
        cols[ptr] = np.empty(n + 1, np.int64)
        for name, dt in items:
            cols[name] = np.empty(guess if code != _wire.GROW_UNK else 16, dt)
    tables = {k: new_table(cap) for k, cap in (("names", 1024), ("attr_names", 64))}
    st = np.zeros(8, dtype=np.int64)
    st[_wire.ST_POS] = pos
    while True:
        # the decoder writes the bits of the float values: their column viewed as uint64
        arrays = [a.view(np.uint64) if a.dtype == np.float64 else a for a in cols.values()]
        try:
            status = _wire.decode_nodes(  # type: ignore[call-arg]
                buf, buf.size, n, st, *arrays, *tables["names"], *tables["attr_names"], err
            )
        except _wire.MalformedNode:
            _raise_node(path, buf, err)
        if status == 0:
            break
        if status in _GROUPS:
            # at least double: the node being decoded may hold more items than the estimate
            # from the share decoded so far (one node with 4,000 attributes), and a capacity
            # recomputed from the same state would fail on the same node forever
            items = _GROUPS[status][1]
            used = int(st[_COUNTER[status]])
            done = max(int(st[_wire.ST_POS]) - pos, 1)
            have = cols[items[0][0]].shape[0]
            cap = max(int(used * total / done * 1.05) + 1024, 2 * have + 16)
            for name, dt in items:  # not resized: that would zero the new room first
                grown = np.empty(cap, dt)
                grown[:used] = cols[name][:used]
                cols[name] = grown
        else:
            key = "names" if status == _wire.GROW_NAMES else "attr_names"
            used = int(st[_wire.ST_NAMES if key == "names" else _wire.ST_ATTR_NAMES])
            tables[key] = grow_table(tables[key], used)
    sizes = {"ctrl": _wire.ST_CTRL, "data": _wire.ST_DATA, "unk_off": _wire.ST_UNK,
             "unk_len": _wire.ST_UNK}  # fmt: skip
    out = []
    for name, arr in cols.items():
        if name.startswith("attr_") and not name.endswith("_ptr"):
            k = int(st[_wire.ST_ATTR])
        elif name in sizes:
            k = int(st[sizes[name]])
        else:
            out.append(arr)
            continue
        out.append(_trimmed(arr, k))
    out.append(tables["names"][1][: int(st[_wire.ST_NAMES])])
    out.append(tables["attr_names"][1][: int(st[_wire.ST_ATTR_NAMES])])
    return out


def _trimmed(arr: np.ndarray, n: int) -> np.ndarray:
    """The first ``n`` items of ``arr`` (a 1-d array that owns its memory and that nothing else
    uses), reallocated in place: neither a copy nor a view that keeps the unused room."""
    arr.resize(n, refcheck=False)
    return arr


def _raise_node(path: Path, buf: np.ndarray, err: np.ndarray) -> NoReturn:
    code, row, offset, fno, rec_off, rec_len, value = (int(x) for x in err)
    node_id = _peek_id(buf, rec_off, rec_len)
    who = f"node id {node_id} (row {row})" if node_id is not None else f"node row {row}"
    text = _wire.ERROR_TEXT[code]
    if code == _wire.E_TIME_RANGE:
        text = f"{_TIME_FIELDS.get(fno, 'time')} " + text.format(value=value & ((1 << 64) - 1))
    elif code == _wire.E_NODE_TYPE_RANGE:
        text = text.format(value=value)
    raise ChakraFormatError(path, f"{who}, field {fno} at byte {offset}: {text}")


_TIME_FIELDS = {6: "start_time_micros", 7: "duration_micros"}


def decoded_names(
    path: Path, buf: np.ndarray, rep: np.ndarray, idx: np.ndarray, what: str
) -> tuple[str, ...]:
    """The interned strings (spans ``rep[k] = (offset, length)`` into ``buf``) as text."""
    names = []
    for k, (o, n) in enumerate(rep.tolist()):
        raw = buf[o : o + n].tobytes()
        try:
            names.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            row = int(np.flatnonzero(idx == k)[0])
            raise ChakraFormatError(
                path, f"{what} of row {row} is not valid UTF-8: {raw[:40]!r}"
            ) from None
    return tuple(names)
