"""Every docstring example in the package runs and gives what it says."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import lumos

MODULES = [
    "lumos",
    *sorted(
        m.name
        for m in pkgutil.walk_packages(lumos.__path__, prefix="lumos.")
        if not m.ispkg and m.name != "lumos.__main__"  # running it would start the CLI
    ),
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    try:
        module = importlib.import_module(name)
    except ImportError as exc:  # pragma: no cover - an optional extra (torch) is missing
        pytest.skip(f"{name} needs an optional dependency: {exc}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
