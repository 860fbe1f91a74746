"""The two sides of a differential kernel test, each checked to be what it says it is.

A test that compares a compiled kernel with its Python source proves nothing when both sides
run the same code: where ``pip install`` could not compile the kernel, the "compiled" module is
its ``.py`` source too. :func:`compiled` returns the extension module and skips the test (with
the reason) where it is not one; :func:`interpreted` returns the Python twin and asserts it was
loaded from the ``.py`` source. ``tests/unit/test_compiled.py`` fails wherever a C compiler
exists and a kernel was not compiled, so the skip never hides a broken build in CI.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

from lumos import _compiled

__all__ = ["compiled", "interpreted"]


def compiled(name: str) -> ModuleType:
    """Kernel module ``name`` as imported, asserted compiled (else the calling test skips)."""
    module = importlib.import_module(name)
    if not _compiled.is_compiled(module):
        pytest.skip(f"{name} is not compiled here: its Python source would be compared with itself")
    return module


def interpreted(name: str) -> ModuleType:
    """Kernel module ``name`` loaded from its ``.py`` source, asserted to be that source and not
    the compiled module."""
    twin = _compiled.python_twin(name)
    assert not _compiled.is_compiled(twin), name
    assert str(twin.__file__).endswith(f"{name.rsplit('.', 1)[-1]}.py"), twin.__file__
    assert twin is not importlib.import_module(name)
    return twin
