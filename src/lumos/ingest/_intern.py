"""String interning: repeated names become small integer ids into one table."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = ["Interner"]


class Interner:
    """Assigns dense ids to strings in first-seen order (so ids are deterministic).

    >>> it = Interner()
    >>> it.ids(["b", "a", "b"]).tolist(), it.table()
    ([0, 1, 0], ('b', 'a'))
    """

    __slots__ = ("_ids", "_names")

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._names: list[str] = []

    def id(self, name: str) -> int:
        """The id of ``name``, assigning the next one if it is new."""
        i = self._ids.get(name)
        if i is None:
            i = self._ids[name] = len(self._names)
            self._names.append(name)
        return i

    def ids(self, names: Iterable[str]) -> np.ndarray:
        """Ids of many names at once, as an int32 array."""
        get = self._ids.get
        out: list[int] = []
        append = out.append
        for n in names:
            i = get(n)
            if i is None:
                i = self.id(n)
            append(i)
        return np.asarray(out, dtype=np.int32)

    def table_view(self) -> list[str]:
        """The live list of interned strings (do not modify)."""
        return self._names

    def table(self) -> tuple[str, ...]:
        """Every interned string, indexed by id."""
        return tuple(self._names)
