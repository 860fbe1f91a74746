"""File edges shared by every reader and writer: sniffing, bounded decompression, atomic writes.

Readers call :func:`read_bytes` (plain, gzip/bzip2/xz, or one member of a tar archive) and get the
whole decompressed payload or one :class:`~lumos.errors.InputError` that names the file. Writers
call :func:`check_writable` before the work and :func:`atomic_write` (one file) or
:func:`atomic_outputs` (a set of files) so that a crash never leaves a half-written output that
looks complete.

Decompression is streamed and bounded. A decompression bomb is recognized by what no real trace
has, never by total size (multi-GB traces are normal): once more than 16 MiB has come out, the
output may not exceed :func:`max_compression_ratio` times the compressed input read so far (real
traces compress 13-30:1, the worst running ratio seen on real data is under 50:1; a bomb of zeros
compresses about 1000:1). The limit is 200:1, raised with the environment variable
``LUMOS_MAX_COMPRESSION_RATIO``.

Inputs that are not regular files: a pipe (``<(zcat t.json.gz)``) is read once into memory and
served from there; a device (``/dev/zero``) is refused.
"""

from __future__ import annotations

import bz2
import contextlib
import io
import lzma
import mmap
import os
import shutil
import stat
import tarfile
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Literal, Protocol, overload

from lumos.errors import ConfigError, InputError, OutputError

__all__ = [
    "MAX_RATIO_ENV",
    "atomic_outputs",
    "atomic_write",
    "check_writable",
    "decompress",
    "is_gzip",
    "iter_heads",
    "max_compression_ratio",
    "read_bytes",
    "read_payload",
    "read_stream_input",
]

GZIP_MAGIC = b"\x1f\x8b"
_XZ_MAGIC = b"\xfd7zXZ\x00"
_BZ2_MAGIC = b"BZh"
#: Environment variable that raises (or lowers) the compression-ratio limit.
MAX_RATIO_ENV = "LUMOS_MAX_COMPRESSION_RATIO"
DEFAULT_MAX_RATIO = 200.0
#: Decompressed bytes before the ratio is judged (small files may compress as they like).
_RATIO_FLOOR = 16 << 20
#: Compressed bytes read at a time: with the floor, a bomb is stopped after ~16 MiB of output.
_FEED = 1 << 16
_OUT_STEP = 1 << 20


class _Reader(Protocol):
    def read(self, n: int = -1, /) -> bytes: ...


def is_gzip(head: bytes) -> bool:
    """True when ``head`` starts with the gzip magic number."""
    return head[:2] == GZIP_MAGIC


def compression_of(head: bytes) -> Literal["gzip", "bzip2", "xz"] | None:
    """The compression format ``head`` starts with (gzip, bzip2, xz), or None for plain data."""
    if head[:2] == GZIP_MAGIC:
        return "gzip"
    if head[:6] == _XZ_MAGIC:
        return "xz"
    if head[:3] == _BZ2_MAGIC and head[3:4].isdigit() and head[4:10] == b"1AY&SY":
        return "bzip2"
    return None


def max_compression_ratio() -> float:
    """The largest decompressed/compressed ratio accepted (``LUMOS_MAX_COMPRESSION_RATIO``)."""
    raw = os.environ.get(MAX_RATIO_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_RATIO
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value > 1:
        raise ConfigError(
            f"{MAX_RATIO_ENV}={raw!r}: expected a number above 1 (default {DEFAULT_MAX_RATIO:g})"
        )
    return value


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.0f} MiB" if n >= 1 << 20 else f"{n / 1024:.0f} KiB"


class _Prefixed:
    """``prefix`` followed by the rest of ``raw`` (a peek that works on any stream)."""

    def __init__(self, prefix: bytes, raw: _Reader) -> None:
        self._prefix = prefix
        self._raw = raw

    def read(self, n: int = -1, /) -> bytes:
        if not self._prefix:
            return self._raw.read(n)
        if n < 0:
            out, self._prefix = self._prefix + self._raw.read(), b""
            return out
        out, self._prefix = self._prefix[:n], self._prefix[n:]
        return out + self._raw.read(n - len(out)) if len(out) < n else out


class _Inflater:
    """The decompressed content of a gzip, bzip2 or xz stream, read in bounded steps.

    Concatenated streams (``cat a.gz b.gz``) are read as one, zero padding between them is
    skipped. A stream that ends early raises "truncated"; output beyond
    :func:`max_compression_ratio` times the input read so far raises "decompression bomb". A
    read that hits the truncation after producing some bytes returns them first (so a sniffer
    sees the head of a truncated file) and raises on the next read.
    """

    def __init__(self, raw: _Reader, fmt: str, where: str) -> None:
        self._raw = raw
        self._fmt = fmt
        self._where = where
        self._limit = max_compression_ratio()
        self._d: Any = self._new()
        self._tail = b""
        self._n_in = 0
        self._n_out = 0
        self._error: InputError | None = None

    def _new(self) -> Any:
        if self._fmt == "gzip":
            return zlib.decompressobj(16 + zlib.MAX_WBITS)
        if self._fmt == "bzip2":
            return bz2.BZ2Decompressor()
        return lzma.LZMADecompressor()

    def _feed(self) -> bytes:
        data = self._raw.read(_FEED)
        self._n_in += len(data)
        return data

    def _truncated(self) -> InputError:
        return InputError(self._where, f"truncated {self._fmt} stream (file ends early)")

    def _next_stream(self) -> bool:
        """After one stream ends: start the next concatenated one; False at the end of input."""
        rest = (self._d.unused_data + self._tail).lstrip(b"\0")
        while len(rest) < 10:
            more = self._feed()
            if not more:
                break
            rest = (rest + more).lstrip(b"\0")
        if not rest:
            return False
        if compression_of(rest) != self._fmt:
            raise InputError(
                self._where, f"unexpected data after the end of the {self._fmt} stream"
            )
        self._d, self._tail = self._new(), rest
        return True

    def _step(self, max_out: int) -> bytes | None:
        """Up to ``max_out`` more bytes (maybe none yet); None at the end of the input."""
        d = self._d
        if d.eof:
            if not self._next_stream():
                return None
            d = self._d
        try:
            if self._fmt == "gzip":
                if not self._tail:
                    self._tail = self._feed()
                    if not self._tail:
                        raise self._truncated()
                out = d.decompress(self._tail, max_out)
                self._tail = d.unconsumed_tail
            else:
                data = b""
                if d.needs_input:
                    data, self._tail = self._tail or self._feed(), b""
                    if not data:
                        raise self._truncated()
                out = d.decompress(data, max_out)
        except (zlib.error, OSError, lzma.LZMAError, EOFError, ValueError) as exc:
            raise InputError(self._where, f"corrupt {self._fmt} data: {exc}") from None
        self._n_out += len(out)
        if self._n_out > _RATIO_FLOOR and self._n_out > self._limit * self._n_in:
            raise InputError(
                self._where,
                f"decompresses to more than {self._limit:g} times its compressed size "
                f"({_mib(self._n_out)} from {_mib(self._n_in)} so far); real traces compress "
                "13-30:1, so this looks like a decompression bomb (to read it anyway, set "
                f"{MAX_RATIO_ENV} above {self._limit:g})",
            )
        return out

    def read(self, n: int = -1, /) -> bytes:
        if self._error is not None:
            raise self._error
        if n < 0:
            return self.readall()
        parts: list[bytes] = []
        got = 0
        while got < n:
            try:
                out = self._step(n - got)
            except InputError as exc:
                if not parts:
                    raise
                self._error = exc
                break
            if out is None:
                break
            parts.append(out)
            got += len(out)
        return b"".join(parts)

    def readall(self) -> bytes:
        buf = io.BytesIO()
        while (out := self._step(_OUT_STEP)) is not None:
            buf.write(out)
        return buf.getvalue()  # no copy: BytesIO hands over its buffer


def _read_exact(raw: _Reader, n: int) -> bytes:
    parts = []
    while n > 0 and (b := raw.read(n)):
        parts.append(b)
        n -= len(b)
    return b"".join(parts)


def _decompressing(raw: _Reader, where: str) -> _Reader:
    """``raw`` decompressed when it starts with a known compression's magic number."""
    head = _read_exact(raw, 10)
    fmt = compression_of(head)
    src = _Prefixed(head, raw)
    return src if fmt is None else _Inflater(src, fmt, where)


def decompress(data: bytes, where: str) -> bytes:
    """``data`` decompressed (bounded like a file) when it is compressed, else ``data`` itself."""
    if compression_of(data[:10]) is None:
        return data
    return _decompressing(io.BytesIO(data), where).read()


def read_stream_input(path: str | os.PathLike[str]) -> bytes | None:
    """The raw bytes of ``path`` when it is a pipe or socket (which can be read only once), read
    now so that sniffing and reading see the same bytes; None for a regular file."""
    p = Path(path)
    st = _stat(p)
    if stat.S_ISREG(st.st_mode):
        return None
    with _open(p, None) as f:
        return f.read()


def _stat(p: Path) -> os.stat_result:
    try:
        st = p.stat()
    except FileNotFoundError:
        raise InputError(p, "no such file") from None
    except PermissionError:
        raise InputError(p, "permission denied") from None
    except OSError as exc:
        raise InputError(p, f"cannot read: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(p, "is a directory, expected a file")
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        raise InputError(p, "is a device, not a trace file")
    return st


def _open(p: Path, data: bytes | None) -> IO[bytes]:
    if data is not None:
        return io.BytesIO(data)
    _stat(p)
    try:
        return p.open("rb")
    except PermissionError:
        raise InputError(p, "permission denied") from None
    except OSError as exc:
        raise InputError(p, f"cannot read: {exc.strerror or exc}") from None


def _looks_like_tar(head: bytes) -> bool:
    """A valid tar header block (checksum included) at the start of ``head``."""
    if len(head) < tarfile.BLOCKSIZE:
        return False
    try:
        tarfile.TarInfo.frombuf(head[: tarfile.BLOCKSIZE], "utf-8", "surrogateescape")
    except tarfile.HeaderError:
        return False
    return True


def read_bytes(
    path: str | os.PathLike[str], member: str | None = None, *, data: bytes | None = None
) -> bytes:
    """The decompressed content of ``path``.

    Plain, gzip, bzip2 and xz files are sniffed by content, not by name. With ``member``,
    ``path`` is a tar archive (optionally compressed) and the named member is returned (itself
    decompressed when compressed). ``data``: the file's raw bytes, already read (a pipe). Every
    failure (missing file, directory, device, truncated or corrupt data, a decompression bomb, a
    missing or duplicated member) raises :class:`InputError` naming the file.
    """
    p = Path(path)
    where = f"{p}::{member}" if member else str(p)
    with _open(p, data) as raw:
        try:
            if member is None:
                head = _read_exact(raw, 10)
                if compression_of(head) is None:
                    if data is not None:
                        return data
                    raw.seek(0)
                    return raw.read()
                return _Inflater(_Prefixed(head, raw), str(compression_of(head)), where).read()
            payload = _tar_member(_decompressing(raw, str(p)), p, member)
        except OSError as exc:
            raise InputError(p, f"cannot read: {exc.strerror or exc}") from None
    return decompress(payload, where)


#: Plain files this big or bigger are memory-mapped by :func:`read_payload` rather than read.
MAP_MIN_BYTES = 64 << 20


def read_payload(
    path: str | os.PathLike[str], member: str | None = None, *, data: bytes | None = None
) -> bytes | mmap.mmap:
    """:func:`read_bytes`, except that a plain (uncompressed) regular file of
    :data:`MAP_MIN_BYTES` or more comes back memory-mapped, read-only: a multi-GB trace is then
    read from the page cache as it is scanned, with no copy and no second GB in memory."""
    if member is None and data is None:
        mapped = _map_plain(Path(path))
        if mapped is not None:
            return mapped
    return read_bytes(path, member, data=data)


def _map_plain(p: Path) -> mmap.mmap | None:
    try:
        if not stat.S_ISREG(p.stat().st_mode) or p.stat().st_size < MAP_MIN_BYTES:
            return None
        with p.open("rb") as f:
            if compression_of(f.read(10)) is not None:
                return None
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None  # read_bytes names the problem
    if hasattr(mapped, "madvise"):
        mapped.madvise(mmap.MADV_SEQUENTIAL)
    return mapped


def _tar_member(stream: _Reader, p: Path, member: str) -> bytes:
    where = f"{p}::{member}"
    found: bytes | None = None
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tar:  # type: ignore[call-overload]
            for info in tar:
                if info.name != member:
                    continue
                if found is not None:
                    raise InputError(where, "the archive holds two members of this name")
                f = tar.extractfile(info) if info.isfile() else None
                if f is None:
                    raise InputError(where, "not a regular file in the archive")
                found = f.read()
    except tarfile.TarError as exc:
        raise InputError(p, f"cannot read archive: {exc}") from None
    if found is None:
        raise InputError(p, f"archive has no member {member!r}")
    return found


_HEAD_BYTES = 65536


def iter_heads(
    path: str | os.PathLike[str], *, data: bytes | None = None
) -> Iterator[tuple[str | None, bytes]]:
    """``(member, first 64 KiB decompressed)`` of a file (member None) or of every regular,
    non-hidden member of a tar archive, in the archive's order, reading it once.

    A truncated compressed file yields the part that decompressed (reading it raises later); a
    compressed file with nothing readable, or an archive holding two members of one name, raises
    :class:`InputError`.
    """
    p = Path(path)
    with _open(p, data) as raw:
        try:
            stream = _decompressing(raw, str(p))
            head = _read_exact(stream, _HEAD_BYTES)
            if not _looks_like_tar(head):
                yield None, head
                return
            seen: set[str] = set()
            with tarfile.open(  # type: ignore[call-overload]
                fileobj=_Prefixed(head, stream), mode="r|"
            ) as tar:
                for info in tar:
                    if not info.isfile():
                        continue
                    if info.name in seen:
                        raise InputError(
                            p,
                            f"archive holds two members named {info.name!r}; lumos cannot "
                            "tell which one is meant",
                        )
                    seen.add(info.name)
                    if Path(info.name).name.startswith("."):
                        continue
                    f = tar.extractfile(info)
                    if f is not None:
                        member = _decompressing(f, f"{p}::{info.name}")
                        yield info.name, _read_exact(member, _HEAD_BYTES)
        except tarfile.TarError as exc:
            raise InputError(p, f"cannot read archive: {exc}") from None
        except OSError as exc:
            raise InputError(p, f"cannot read: {exc.strerror or exc}") from None


OutputKind = Literal["dir", "file", "prefix"]


def check_writable(path: str | os.PathLike[str], kind: OutputKind) -> Path:
    """Refuse, before any work, an output path that cannot be written; returns it as a Path.

    ``kind``: ``dir`` (a directory, created if missing), ``file`` (a file, its directory
    created), ``prefix`` (files ``<prefix>.<suffix>``: its directory created). The nearest
    existing ancestor must be a writable directory (not a regular file) and an existing target
    must be of the right kind. Raises :class:`~lumos.errors.OutputError` naming the path.
    """
    p = Path(path)
    if p.exists():
        if kind == "dir" and not p.is_dir():
            raise OutputError(p, "it exists and is not a directory")
        if kind != "dir" and p.is_dir():
            raise OutputError(p, "it is a directory, expected a file name")
    first_new = p if kind == "dir" else p.parent
    parent = first_new
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise OutputError(p, f"{parent} is not a directory")
    target = p if kind == "dir" and p.is_dir() else parent
    if not os.access(target, os.W_OK | os.X_OK):
        raise OutputError(p, f"no permission to write in {target}")
    return p


def _os_error(path: Path, exc: OSError) -> OutputError:
    return OutputError(path, exc.strerror or str(exc))


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
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise _os_error(path, exc) from None
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
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError):  # disk full, quota, read-only file system
            raise _os_error(path, exc) from None
        raise


@contextlib.contextmanager
def atomic_outputs(out_dir: str | os.PathLike[str], main: str) -> Iterator[Path]:
    """Write a set of files atomically as a set: yields a temporary directory beside them
    (inside ``out_dir``) to write every file into; when the block succeeds, each file replaces
    its namesake in ``out_dir`` and ``main`` (the file that names the others) comes last, after
    the previous ``main`` was removed first. So at every instant ``out_dir`` holds the previous
    complete set, or no ``main`` (an unfinished set, visibly), or the new complete set. When the
    block fails (an error, Ctrl-C, SIGTERM under the CLI) the temporary directory is removed and
    ``out_dir`` is as it was. A folder in the set replaces its namesake whole (the old one is
    moved into the temporary directory first, and removed with it).
    """
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".lumos-", suffix=".tmp", dir=out))
    except OSError as exc:
        raise _os_error(out, exc) from None
    try:
        yield tmp
        names = sorted(q.name for q in tmp.iterdir())
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(out / main)
            for name in sorted(names, key=lambda n: n == main):
                if (tmp / name).is_dir() and (out / name).is_dir():
                    os.replace(out / name, tmp / f".old-{name}")
                os.replace(tmp / name, out / name)
        except OSError as exc:
            raise _os_error(out, exc) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
