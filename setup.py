"""Build lumos's compiled kernels during ``pip install`` (setuptools reads the rest from
``pyproject.toml``).

A kernel module is a Python file in Cython's pure-Python mode whose first line is a ``# cython:``
directive comment. Each is compiled to an extension module beside its source (``pip install -e .``
builds them in place) with the platform's C compiler; a module that fails to compile, or a machine
without Cython or a compiler, keeps the Python source, which gives the same results slowly
(``lumos._compiled`` says which is running).
"""

from __future__ import annotations

import sys
from pathlib import Path

from setuptools import Extension, setup

SRC = Path(__file__).parent / "src"


def kernel_sources() -> list[tuple[str, str]]:
    """``(module, path)`` of every kernel module under ``src/lumos``, sorted."""
    out = []
    for path in sorted((SRC / "lumos").rglob("*.py")):
        with path.open(encoding="utf-8") as f:
            first = f.readline()
        if first.startswith("# cython:"):
            rel = path.relative_to(SRC).with_suffix("")
            out.append((".".join(rel.parts), str(path.relative_to(Path(__file__).parent))))
    return out


def extensions() -> list[Extension]:
    """One optional extension per kernel module (a C compile that fails leaves the ``.py``
    source); a module Cython cannot translate is left out the same way, said on stderr."""
    try:
        from Cython.Build import cythonize
    except ImportError:  # no Cython in the build environment: the kernels run as Python
        return []
    out: list[Extension] = []
    for name, path in kernel_sources():
        try:
            out += cythonize(
                [Extension(name, [path], optional=True)],
                compiler_directives={"language_level": 3},
                quiet=True,
            )
        except Exception as exc:  # any failure: the module runs as Python
            print(f"lumos: {name} is not compiled ({exc}); it runs as Python", file=sys.stderr)
    return out


setup(ext_modules=extensions())
