"""Which kernels run compiled: the modules ``pip install`` compiles, and their Python twins.

A kernel module (its first line a ``# cython:`` directive, see ``setup.py``) is one source: Cython
compiles it to an extension module beside the ``.py`` file, which Python then imports instead;
where it was not compiled (no C compiler, no Cython), the ``.py`` file runs as Python, with the
same results, slowly. :func:`status` says which each module is; :func:`python_twin` loads a
module's ``.py`` source as Python even where the extension exists (for tests that compare the two).
``lumos --version -v`` prints the status.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["KERNEL_MODULES", "is_compiled", "python_twin", "status"]

#: Every kernel module, as ``setup.py`` finds them (``tests/unit/test_compiled.py`` keeps the
#: two lists equal).
KERNEL_MODULES: tuple[str, ...] = (
    "lumos._intern",
    "lumos.chakra._encode_attrs",
    "lumos.chakra._wire",
    "lumos.chakra._wire_attr",
    "lumos.chakra.view",
    "lumos.estimate._repeat",
    "lumos.graph._order",
    "lumos.ingest._enclose",
    "lumos.ingest.json_scan",
    "lumos.ingest.kineto_scan",
    "lumos.link._lcs",
    "lumos.report._kernels",
    "lumos.sim._kernel",
)


def is_compiled(module: ModuleType) -> bool:
    """Whether ``module`` was loaded from a compiled extension, not from its ``.py`` source."""
    return not str(getattr(module, "__file__", "") or "").endswith(".py")


def status() -> dict[str, bool]:
    """``{module: compiled?}`` for every kernel module (importing them)."""
    return {name: is_compiled(importlib.import_module(name)) for name in KERNEL_MODULES}


def python_twin(name: str) -> ModuleType:
    """Kernel module ``name`` loaded from its ``.py`` source as a separate module (named
    ``name + "__py"``), whether or not the compiled extension exists."""
    module = importlib.import_module(name)
    spec = module.__spec__
    assert spec is not None and spec.origin is not None
    source = Path(spec.origin).parent / (name.rsplit(".", 1)[-1] + ".py")
    twin_name = name + "__py"
    if twin_name in sys.modules:
        return sys.modules[twin_name]
    twin_spec = importlib.util.spec_from_file_location(twin_name, source)
    assert twin_spec is not None and twin_spec.loader is not None
    twin = importlib.util.module_from_spec(twin_spec)
    sys.modules[twin_name] = twin
    twin_spec.loader.exec_module(twin)
    return twin
