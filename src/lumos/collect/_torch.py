"""The one place lumos imports torch: lazily, with a one-line error when it is missing."""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from lumos.errors import MissingDependencyError

__all__ = ["import_torch", "require_torch", "torch_available"]


def torch_available() -> bool:
    """True when ``import torch`` would find a module (does not import it)."""
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


def require_torch(purpose: str) -> None:
    """Raise :class:`MissingDependencyError` (naming ``purpose``) unless torch is installed."""
    if not torch_available():
        raise MissingDependencyError("torch", "torch", purpose)


def import_torch(purpose: str) -> ModuleType:
    """``import torch``, or :class:`MissingDependencyError` saying how to install it."""
    try:
        return importlib.import_module("torch")
    except ImportError:
        raise MissingDependencyError("torch", "torch", purpose) from None
