"""Counted warnings: how lumos degrades without hiding it.

When a stage meets input it can handle only approximately (an unmatched correlation id, a
collective with no peer), it does not log and carry on: it records a *counted warning* in the
result's :class:`Diagnostics` under a short stable code, keeping the first example so a user can
find the offending event. Reports and the CLI print the counts.

>>> d = Diagnostics()
>>> d.warn("launch_without_kernel", "cudaLaunchKernel corr=17")
>>> d.warn("launch_without_kernel", "cudaLaunchKernel corr=18")
>>> d.count("launch_without_kernel"), d.example("launch_without_kernel")
(2, 'cudaLaunchKernel corr=17')
>>> d.to_dict()
{'launch_without_kernel': {'count': 2, 'example': 'cudaLaunchKernel corr=17'}}
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

__all__ = ["Diagnostics"]


class Diagnostics:
    """An ordered mapping ``code -> (count, first example)``.

    Codes keep the order in which they were first warned, so printing and serialising are
    deterministic. A stage owns its Diagnostics while it builds a result; once attached to a
    result it should be treated as read-only (use :meth:`copy` and :meth:`merge` to combine).
    """

    __slots__ = ("_counts", "_examples")

    def __init__(self, counts: Mapping[str, int] | None = None) -> None:
        self._counts: dict[str, int] = {}
        self._examples: dict[str, str] = {}
        for code, n in (counts or {}).items():
            self.warn(code, "", n)

    def warn(self, code: str, example: str = "", count: int = 1) -> None:
        """Add ``count`` occurrences of ``code``; the first non-empty ``example`` is kept."""
        if count <= 0:
            return
        self._counts[code] = self._counts.get(code, 0) + int(count)
        if example and not self._examples.get(code):
            self._examples[code] = example

    def count(self, code: str) -> int:
        """How many times ``code`` was warned (0 if never)."""
        return self._counts.get(code, 0)

    def example(self, code: str) -> str:
        """The first example recorded for ``code`` ("" if none)."""
        return self._examples.get(code, "")

    def merge(self, other: Diagnostics) -> None:
        """Add every count of ``other`` into this one."""
        for code, n in other._counts.items():
            self.warn(code, other._examples.get(code, ""), n)

    def copy(self) -> Diagnostics:
        """An independent copy."""
        out = Diagnostics()
        out.merge(self)
        return out

    def to_dict(self) -> dict[str, dict[str, int | str]]:
        """``{code: {"count": n, "example": text}}`` in first-warned order (JSON-ready)."""
        return {
            code: {"count": n, "example": self._examples.get(code, "")}
            for code, n in self._counts.items()
        }

    @property
    def total(self) -> int:
        """Sum of all counts."""
        return sum(self._counts.values())

    def __iter__(self) -> Iterator[str]:
        return iter(self._counts)

    def __len__(self) -> int:
        return len(self._counts)

    def __bool__(self) -> bool:
        return bool(self._counts)

    def __contains__(self, code: object) -> bool:
        return code in self._counts

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Diagnostics):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        inner = ", ".join(f"{c}={n}" for c, n in self._counts.items())
        return f"Diagnostics({inner})"
