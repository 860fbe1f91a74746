"""The lumos exception tree.

Every error lumos raises on purpose derives from :class:`LumosError`, so a caller (and the CLI)
can catch one type. Each error names the file it is about when there is one::

    LumosError
    ├── InputError                 bad or unreadable input (always names the file)
    │   ├── TraceFormatError       a file that is not, or no longer, a valid trace of its kind
    │   ├── ChakraFormatError      a Chakra .et file that does not decode
    │   └── NoTracesError          a path or directory holding no trace at all
    ├── OutputError                an output path that cannot be written (names the path)
    ├── GraphError                 an execution graph that breaks an invariant (cycle, dangling id)
    ├── SimulationError            the simulator could not finish (deadlock, unmatched collective)
    ├── ConfigError                a user option that does not make sense
    └── MissingDependencyError     an optional extra (torch, dask, matplotlib) is not installed

The CLI prints ``lumos: error: <message>`` on one line and exits 1 (traceback with ``-v``).

Every error pickles intact (``__reduce__`` replays its constructor arguments), so an error raised
in a worker process or on a Dask worker reaches the caller as the same type with the same message.
"""

from __future__ import annotations

from os import PathLike

__all__ = [
    "ChakraFormatError",
    "ConfigError",
    "GraphError",
    "InputError",
    "LumosError",
    "MissingDependencyError",
    "NoTracesError",
    "OutputError",
    "SimulationError",
    "TraceFormatError",
]


class LumosError(Exception):
    """Root of every error lumos raises on purpose."""

    def __reduce__(self) -> tuple[object, ...]:
        # Exception pickles as ``cls(*self.args)``, which breaks for subclasses whose
        # ``__init__`` takes other arguments than the message; replay the real ones instead.
        return (_rebuild, (type(self), self._init_args(), self.__dict__))

    def _init_args(self) -> tuple[object, ...]:
        return self.args


def _rebuild(
    cls: type[LumosError], args: tuple[object, ...], state: dict[str, object]
) -> LumosError:
    err = cls(*args)
    err.__dict__.update(state)
    return err


class InputError(LumosError):
    """A file or directory that cannot be used; the message starts with its path."""

    def __init__(self, path: str | PathLike[str] | None, problem: str) -> None:
        self.path = None if path is None else str(path)
        self.problem = problem
        super().__init__(problem if self.path is None else f"{self.path}: {problem}")

    def _init_args(self) -> tuple[object, ...]:
        return (self.path, self.problem)


class TraceFormatError(InputError):
    """A Kineto or PyTorch ET file that is malformed, truncated or not a trace."""


class ChakraFormatError(InputError):
    """A Chakra execution-trace file that does not decode or breaks the schema."""


class NoTracesError(InputError):
    """A path (usually a directory) that holds no trace lumos recognizes."""


class OutputError(LumosError):
    """An output path that cannot be written: under a regular file, no permission, disk full."""

    def __init__(self, path: str | PathLike[str], problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"cannot write {self.path}: {problem}")

    def _init_args(self) -> tuple[object, ...]:
        return (self.path, self.problem)


class GraphError(LumosError):
    """An execution graph that breaks an invariant: a cycle, a dangling dependency id."""


class SimulationError(LumosError):
    """The simulator could not finish: a deadlock or a collective some rank never joins."""


class ConfigError(LumosError):
    """A user option or scenario that does not make sense."""


class MissingDependencyError(LumosError):
    """An optional dependency is needed; the message says which extra installs it."""

    def __init__(self, package: str, extra: str, purpose: str) -> None:
        self.package = package
        self.extra = extra
        self.purpose = purpose
        super().__init__(
            f"{purpose} needs {package}, which is not installed; "
            f"install it with: pip install 'lumos[{extra}]'"
        )

    def _init_args(self) -> tuple[object, ...]:
        return (self.package, self.extra, self.purpose)
