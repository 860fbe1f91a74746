"""Compiled kernels without a first-run wait: cached, compiled ahead in the background, or interpreted.

A numba kernel compiles on its first call (seconds per kernel on a loaded machine) unless
numba's on-disk cache already holds it, and ``pip install`` runs no code, so a user's first
``lumos replay`` would pay for every kernel it calls. A :class:`Kernel` wraps an entry point
(``numba.njit(cache=True)``) with its one argument signature and, on each call, runs:

1. the compiled code when it is in memory or in numba's cache (``NUMBA_CACHE_DIR``);
2. otherwise, while the inputs are small (the ``work`` of this process's interpreted calls
   stays within ``max_interpreted``), the *same source* run by the Python interpreter over
   lists (:func:`interpreted`): no compile at all, same results;
3. otherwise the compiled code, after waiting for a background warmer started by
   :func:`warm_in_background` if one is running (it may have finished by then), or compiling
   in this process if none is.

:func:`warm_in_background` (called by ``lumos replay`` as it starts, and by every other verb but
``comm`` and ``collect``, which run no compiled code, when it ends) starts ``python -m lumos._jit``
in its own session when something is not cached yet; it compiles every kernel into the cache while
the command reads and builds its traces (for small inputs, which run interpreted, only when the
command ends, so as not to slow it), then compiles the functions outside kernels (the Chakra
decoder and encoder among them) by using them on the bundled example (:data:`WARM_UP_MODULE`), and
outlives the command if need be. So the compile is paid once, in the background, after a user's
first command of any kind. A first command that reads Chakra ETs decodes them without the
compiled decoder, in Python (:mod:`lumos.chakra._wire_py`, the same results), up to
:data:`SMALL_INPUT_BYTES` of them in all, and compiles it (seconds) only for more; their
attribute values likewise (:mod:`lumos.chakra._wire_attr_py`, up to as many attribute bytes);
one that writes them (``lumos convert``) encodes them in NumPy (:mod:`lumos.chakra._encode_py`,
the same bytes) up to its ``MAX_BYTES``. Setting ``LUMOS_JIT_BACKGROUND=0`` turns the warmer off.

Rules for a kernel's source, so that the interpreter runs it the same way: arrays are
allocated only with ``np.empty``/``np.zeros``/``np.full`` (one dimension, an explicit dtype) and
used only by indexing, ``len`` and ``.copy()``; results are returned whole (no slices), with
scalars as Python ints; other jitted functions it calls follow the same rules. Every array
argument is passed read-only and C-contiguous in the declared dtype (so that one signature,
cached once, serves every call), except those named in ``writes``, which the kernel fills.
"""

from __future__ import annotations

import atexit
import os
import sys
import time
import types
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numba
import numpy as np
from numba.core.registry import CPUDispatcher
from numba.extending import intrinsic

__all__ = ["Kernel", "borrow", "interpreted", "warm_in_background"]

#: The modules whose kernels the background warmer compiles (the replay path), in the order a
#: replay first needs them.
MODULES = ("lumos._spans",)  # the last numba kernel of the replay path: the span rehash

_A = TypeVar("_A")
_REGISTRY: list[Kernel] = []
_WARMER: int | None = None  # pid


def array(dtype: Any, writes: bool = False, ndim: int = 1) -> Any:
    """The numba type of a C-contiguous array argument (1-d unless ``ndim`` says otherwise;
    read-only unless the kernel ``writes`` it)."""
    return numba.types.Array(numba.from_dtype(np.dtype(dtype)), ndim, "C", readonly=not writes)


INT64 = numba.types.int64


def _borrow(typingctx: Any, arr: Any) -> Any:  # pragma: no cover - compiled
    """``arr`` without its reference count (a null meminfo, as ``numba.carray`` makes).

    Numba increments and decrements (atomically) the count of every array passed to a helper,
    and on paths with early returns it cannot prove those pairs redundant: in the decode loop
    that was 85 % of the time. A borrowed array is only valid while its owner lives, so borrow
    only arguments, which the Python caller keeps alive for the whole call."""

    def codegen(context, builder, sig, args):
        src = context.make_array(sig.args[0])(context, builder, value=args[0])
        out = context.make_array(sig.return_type)(context, builder)
        context.populate_array(
            out,
            data=src.data,
            shape=src.shape,
            strides=src.strides,
            itemsize=src.itemsize,
            meminfo=None,
        )
        return out._getvalue()

    return arr(arr), codegen


if TYPE_CHECKING:

    def borrow(arr: _A) -> _A:
        """In compiled code: ``arr`` without its reference count (see ``_borrow``)."""
        return arr

else:
    borrow = intrinsic(_borrow)


class Kernel:
    """A compiled entry point with its signature; call it as ``kernel(*args, work=n)``.

    ``signature`` lists each argument's numba type (:func:`array`, :data:`INT64`); ``work`` is
    the size that the interpreted run's time grows with (tasks, bytes). ``max_interpreted``
    bounds the work of all interpreted calls of the process together (a kernel called once per
    rank of a big job compiles instead of running interpreted hundreds of times).
    """

    def __init__(self, compiled: Any, signature: Sequence[Any], max_interpreted: int) -> None:
        self.compiled = compiled
        self.signature = tuple(signature)
        self.max_interpreted = max_interpreted
        self._dtypes = [
            np.dtype(str(t.dtype)) if isinstance(t, numba.types.Array) else None
            for t in self.signature
        ]
        self._writes = [isinstance(t, numba.types.Array) and t.mutable for t in self.signature]
        self._interpreted_work = 0
        _REGISTRY.append(self)

    @property
    def name(self) -> str:
        f = self.compiled.py_func
        return f"{f.__module__}.{f.__qualname__}"

    def ready(self) -> bool:
        """Whether the compiled code is in memory, loading it from numba's cache if it is there."""
        disp = self.compiled
        if self.signature in disp.overloads:
            return True
        try:  # numba's own load step of Dispatcher.compile, without its fallback to compiling
            cres = disp._cache.load_overload(self.signature, disp.targetctx)
            if cres is None:
                return False
            disp.targetctx.insert_user_function(cres.entry_point, cres.fndesc, [cres.library])
            disp.add_overload(cres)
        except Exception:  # an unreadable cache entry only means "compile"
            return False
        return True

    def compile(self) -> None:
        """Load from the cache or compile (and cache) the kernel's signature."""
        self.compiled.compile(self.signature)

    def __call__(self, *args: Any, work: int) -> Any:
        args = tuple(self._normalize(args))
        if self.ready():
            return self.compiled(*args)
        if self._interpreted_work + work <= self.max_interpreted:
            self._interpreted_work += work
            return run_interpreted(self.compiled, args)
        _wait_for_warmer(self)
        return self.compiled(*args)

    def _normalize(self, args: Sequence[Any]) -> Any:
        if len(args) != len(self.signature):
            raise TypeError(f"{self.name}: {len(args)} arguments for {len(self.signature)}")
        for a, dtype, writes in zip(args, self._dtypes, self._writes, strict=True):
            if dtype is None:
                yield int(a)
            elif writes:
                yield a  # filled in place: it must already be the declared array
            else:
                view = np.ascontiguousarray(a, dtype=dtype).view()
                view.flags.writeable = False
                yield view


class _Column(list[Any]):
    """A list standing for an array allocated inside an interpreted kernel (keeps its dtype)."""

    __slots__ = ("dtype",)
    dtype: Any


def _alloc(n: int, value: Any, dtype: Any) -> _Column:
    col = _Column([value] * int(n))
    col.dtype = dtype
    return col


_NP_SHIM = types.SimpleNamespace(
    int8=np.int8,
    int32=np.int32,
    int64=np.int64,
    uint8=np.uint8,
    empty=lambda n, dtype: _alloc(n, 0, dtype),
    zeros=lambda n, dtype: _alloc(n, 0, dtype),
    full=lambda n, value, dtype: _alloc(n, value, dtype),
)


def interpreted(disp: Any) -> Callable[..., Any]:
    """The Python source of ``disp`` with ``np`` and every jitted function it calls rebound to
    their interpreted versions; it takes and returns lists where the compiled code uses arrays."""
    memo: dict[Any, Callable[..., Any]] = {}

    def rebind(d: Any) -> Callable[..., Any]:
        f = d.py_func
        if f in memo:
            return memo[f]
        scope = dict(f.__globals__)
        fn = types.FunctionType(f.__code__, scope, f.__name__, f.__defaults__, f.__closure__)
        memo[f] = fn
        for key, value in f.__globals__.items():
            if isinstance(value, CPUDispatcher):
                scope[key] = rebind(value)
        scope["np"] = _NP_SHIM
        return fn

    return rebind(disp)


def run_interpreted(disp: Any, args: Sequence[Any]) -> Any:
    """Run ``disp`` interpreted on arrays: arguments go in as lists, arrays it wrote are updated,
    lists it allocated come back as arrays of their dtype."""
    lists = [a.tolist() if isinstance(a, np.ndarray) else a for a in args]
    out = interpreted(disp)(*lists)
    for a, lst in zip(args, lists, strict=True):
        if isinstance(a, np.ndarray) and a.flags.writeable:
            a[:] = lst
    if isinstance(out, tuple):
        return tuple(_as_array(x) for x in out)
    return _as_array(out)


def _as_array(x: Any) -> Any:
    if isinstance(x, _Column):
        return np.array(x, dtype=x.dtype)
    if isinstance(x, list):
        raise TypeError("an interpreted kernel returned a list it did not allocate (a slice?)")
    return x


def kernels() -> list[Kernel]:
    """Every kernel of :data:`MODULES` (importing them)."""
    import importlib

    for m in MODULES:
        importlib.import_module(m)
    return list(_REGISTRY)


#: The module that lists the compiled functions outside :class:`Kernel` (``DISPATCHERS``) and
#: compiles them by using them once (``warm_up()``); named, not imported, since it uses every
#: stage of the pipeline.
WARM_UP_MODULE = "lumos.warmup"


def cached(disp: Any) -> bool:
    """Whether numba's on-disk cache holds a compiled version of ``disp`` (a function compiled
    with ``numba.njit(cache=True)``)."""
    try:
        return bool(disp._cache._cache_file._load_index())
    except Exception:  # an unreadable cache only means "not cached"
        return False


def _plain_cached() -> bool:
    import importlib

    module = importlib.import_module(WARM_UP_MODULE)
    return all(cached(d) for d in module.dispatchers())


#: Inputs smaller than this (bytes on disk) run interpreted in full: their warmer starts when
#: the command ends, so that it does not take CPU from the command itself. Also the Chakra bytes
#: one process decodes in Python before it compiles the decoder (:mod:`lumos.chakra._wire_py`:
#: 0.64 s for 8 MiB of a converted trace, against a 5 s compile), and, counted apart, the
#: attribute bytes it decodes in Python before it compiles the attribute decoder
#: (:mod:`lumos.chakra._wire_attr_py`: 0.40 s for the 4 MiB of that trace, against 4-8 s).
SMALL_INPUT_BYTES = 8 << 20
_REQUESTED = False


def warm_in_background(input_bytes: int | None = None) -> bool:
    """Compile every kernel not cached yet into numba's cache, and the other compiled functions
    (:data:`WARM_UP_MODULE`), in another process: now, or at exit when ``input_bytes`` (the size
    of the command's input files) is below :data:`SMALL_INPUT_BYTES`.

    Returns whether a warmer was started or scheduled (once per process; never when everything
    is already cached, or when ``LUMOS_JIT_BACKGROUND=0``).
    """
    global _REQUESTED
    if _REQUESTED or os.environ.get("LUMOS_JIT_BACKGROUND", "1") == "0":
        return False
    _REQUESTED = True
    if all(k.ready() for k in kernels()) and _plain_cached():
        return False
    if input_bytes is not None and input_bytes < SMALL_INPUT_BYTES:
        atexit.register(_start_warmer)
    else:
        _start_warmer()
    return True


def _start_warmer() -> None:
    """Spawn the warmer in its own session, detached (no Popen object that would warn at exit
    about a child still running: it is meant to outlive the command)."""
    global _WARMER
    if not hasattr(os, "posix_spawn"):
        return  # no detached spawn here: kernels compile on first use instead
    quiet = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)]
    argv = [sys.executable, "-m", "lumos._jit", "--background"]
    _WARMER = os.posix_spawn(sys.executable, argv, os.environ, file_actions=quiet, setsid=True)


def _warmer_running() -> bool:
    if _WARMER is None:
        return False
    try:
        pid, _ = os.waitpid(_WARMER, os.WNOHANG)
    except ChildProcessError:
        return False
    return pid == 0


def _wait_for_warmer(kernel: Kernel) -> None:
    while _warmer_running() and not kernel.ready():
        time.sleep(0.05)


def main() -> None:
    """``python -m lumos._jit [--background]``: compile every kernel into numba's cache
    (``--background``: at a lower priority than the command that started it)."""
    if "--background" in sys.argv[1:] and hasattr(os, "nice"):
        os.nice(10)
    import lumos._jit as registry  # run as __main__, this module is not the one kernels register in

    for k in registry.kernels():
        k.compile()
    import importlib

    importlib.import_module(WARM_UP_MODULE).warm_up()


if __name__ == "__main__":
    main()
