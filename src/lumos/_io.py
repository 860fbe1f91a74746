"""File edges shared by every reader and writer: sniffing, decompression, atomic writes.

Readers call :func:`read_bytes` (plain, gzip, or one member of a tar archive) and get the whole
decompressed payload or one :class:`~lumos.errors.InputError` that names the file. Writers call
:func:`atomic_write` so that a crash never leaves a half-written file that looks complete.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import tarfile
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Literal, overload

from lumos.errors import InputError

__all__ = ["atomic_write", "is_gzip", "read_bytes"]

GZIP_MAGIC = b"\x1f\x8b"


def is_gzip(head: bytes) -> bool:
    """True when ``head`` starts with the gzip magic number."""
    return head[:2] == GZIP_MAGIC


def read_bytes(path: str | os.PathLike[str], member: str | None = None) -> bytes:
    """The decompressed content of ``path``.

    Plain and gzip files are sniffed by content, not by name. With ``member``, ``path`` is a tar
    archive (optionally compressed) and the named member is returned. Every failure (missing file,
    directory, truncated or corrupt gzip, missing member) raises :class:`InputError` naming the file.
    """
    p = Path(path)
    where = f"{p}::{member}" if member else str(p)
    try:
        if member is not None:
            with tarfile.open(p, "r:*") as tar:
                f = tar.extractfile(member)
                if f is None:
                    raise InputError(where, "not a regular file in the archive")
                raw = f.read()
        else:
            raw = p.read_bytes()
    except InputError:
        raise
    except FileNotFoundError:
        raise InputError(p, "no such file") from None
    except IsADirectoryError:
        raise InputError(p, "is a directory, expected a file") from None
    except KeyError:
        raise InputError(p, f"archive has no member {member!r}") from None
    except PermissionError:
        raise InputError(p, "permission denied") from None
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise InputError(where, f"cannot read archive: {exc}") from None
    if is_gzip(raw):
        try:
            return gzip.decompress(raw)
        except EOFError:
            raise InputError(where, "truncated gzip stream (file ends early)") from None
        except (OSError, zlib.error) as exc:
            raise InputError(where, f"corrupt gzip data: {exc}") from None
    return raw


@overload
def atomic_write(
    path: str | os.PathLike[str], mode: Literal["w"] = "w"
) -> contextlib.AbstractContextManager[IO[str]]: ...
@overload
def atomic_write(
    path: str | os.PathLike[str], mode: Literal["wb"]
) -> contextlib.AbstractContextManager[IO[bytes]]: ...
def atomic_write(
    path: str | os.PathLike[str], mode: str = "w"
) -> contextlib.AbstractContextManager:
    """Open a temporary file beside ``path``; rename it over ``path`` only if the block succeeds.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> with atomic_write(d / "x.txt") as f:
    ...     _ = f.write("done")
    >>> (d / "x.txt").read_text()
    'done'
    """
    return _atomic_write(Path(path), mode)


@contextlib.contextmanager
def _atomic_write(path: Path, mode: str) -> Iterator[IO]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; outputs should look like any other file
    try:
        encoding = None if "b" in mode else "utf-8"
        with os.fdopen(fd, mode, encoding=encoding) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
