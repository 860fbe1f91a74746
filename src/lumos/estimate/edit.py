"""What an edit did, as recorded in ``estimate.json`` (``edits`` of a row)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Edit"]


@dataclass(frozen=True)
class Edit:
    """One edit as recorded in ``estimate.json`` (``edits`` of a row)."""

    name: str
    tasks_added: int = 0
    tasks_removed: int = 0
    tasks_retimed: int = 0
    model: str = ""
    detail: str = ""

    def to_dict(self) -> dict[str, object]:
        return {"edit": self.name, "tasks_added": self.tasks_added,
                "tasks_removed": self.tasks_removed, "tasks_retimed": self.tasks_retimed,
                "model": self.model, "detail": self.detail}  # fmt: skip
