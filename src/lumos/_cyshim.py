"""What lumos's compiled kernels use of Cython's ``cython`` module, for running them as Python.

The kernels are Python files in Cython's pure-Python mode: ``pip install`` compiles them to C
(:mod:`setup`), and a machine without a compiler, or without Cython, imports the same files as
Python. There, ``import cython`` finds Cython's own module when Cython is installed and this
one when it is not: decorators that return the function, types that can be subscripted (for
memoryview annotations like ``cython.const[cython.longlong][::1]``), ``compiled = False``.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = [
    "Py_ssize_t",
    "bint",
    "boundscheck",
    "cast",
    "ccall",
    "cclass",
    "cdivision",
    "cfunc",
    "compiled",
    "const",
    "declare",
    "double",
    "exceptval",
    "final",
    "freelist",
    "initializedcheck",
    "inline",
    "int",
    "locals",
    "longlong",
    "no_gc",
    "schar",
    "uchar",
    "ulonglong",
    "void",
    "wraparound",
]

F = TypeVar("F", bound=Callable[..., Any])

#: Running as Python, not as the compiled extension.
compiled = False


class _Type:
    """A C type: subscripted (``[::1]``, ``[:, ::1]``) it is a memoryview type; called, a
    conversion of its value."""

    def __init__(self, name: str, convert: Callable[[Any], Any]) -> None:
        self.name = name
        self._convert = convert

    def __getitem__(self, _: Any) -> _Type:
        return self

    def __call__(self, value: Any) -> Any:
        return self._convert(value)

    def __repr__(self) -> str:
        return f"cython.{self.name}"


longlong = _Type("longlong", int)
ulonglong = _Type("ulonglong", int)
schar = _Type("schar", int)
uchar = _Type("uchar", int)
Py_ssize_t = _Type("Py_ssize_t", int)
bint = _Type("bint", bool)
double = _Type("double", float)
int = _Type("int", builtins.int)  # C's int (the name shadows the builtin here)
void = _Type("void", lambda value: None)


class _Const:
    def __getitem__(self, t: _Type) -> _Type:
        return t


const = _Const()


def _identity(fn: F) -> F:
    return fn


def _directive(*_: Any, **__: Any) -> Callable[[F], F]:
    return _identity


cfunc = _identity
ccall = _identity
cclass = _identity
final = _identity
no_gc = _identity
inline = _identity
boundscheck = _directive
wraparound = _directive
cdivision = _directive
initializedcheck = _directive
exceptval = _directive
locals = _directive
freelist = _directive


def declare(_: Any, value: Any = None) -> Any:
    return value


def cast(t: _Type, value: Any) -> Any:
    return t(value)
