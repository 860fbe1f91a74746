"""No copy of a third-party trace comes back into the repository.

Every real trace written by upstream tools is read in place from the realdata folder
(``tests/realdata.py``); its ``MANIFEST.json`` holds each file's sha256. A tracked file whose
bytes, or gunzipped bytes, have one of those hashes is a copy, under someone else's licence, and
fails this test; so does one that equals a gzipped upstream file's content. ``CONTRIBUTING.md``
("Test data") says why and what to do instead. Skipped where the folder is absent.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import shutil
import subprocess
import zlib
from pathlib import Path

import pytest
from tests.realdata import manifest, realdata

ROOT = Path(__file__).resolve().parents[2]


def _tracked_files() -> list[Path]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no tracked files to check")
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    return [ROOT / p for p in out.stdout.decode().split("\0") if p]


def _hashes(data: bytes) -> list[str]:
    """sha256 of the bytes and, for gzip files, of the gunzipped bytes."""
    found = [hashlib.sha256(data).hexdigest()]
    if data[:2] == b"\x1f\x8b":
        # not really gzip: the raw hash is all there is
        with contextlib.suppress(OSError, EOFError, zlib.error):
            found.append(hashlib.sha256(gzip.decompress(data)).hexdigest())
    return found


def _upstream_hashes() -> dict[str, dict]:
    """MANIFEST sha256 -> entry, plus the sha256 of each gzipped upstream file's content."""
    entries = manifest()
    upstream = {e["sha256"]: e for e in entries}
    for e in entries:
        for h in _hashes(realdata(e["file"]).read_bytes())[1:]:
            upstream.setdefault(h, e)
    return upstream


def test_no_tracked_file_is_a_copy_of_a_realdata_file():
    upstream = _upstream_hashes()
    copies = []
    for path in _tracked_files():
        if not path.is_file():  # deleted in the work tree, not yet committed
            continue
        for h in _hashes(path.read_bytes()):
            if h in upstream:
                e = upstream[h]
                copies.append(f"{path.relative_to(ROOT)} = {e['repo']}:{e['source_path']}")
    assert not copies, (
        "third-party files copied into the repository (read them in place through "
        "tests/realdata.py instead; see CONTRIBUTING.md):\n" + "\n".join(copies)
    )


def test_the_check_sees_plain_and_gzipped_copies(realdata_dir):
    entry = manifest()[0]
    raw = (realdata_dir / entry["file"]).read_bytes()
    assert entry["sha256"] in _hashes(raw)
    assert entry["sha256"] in _hashes(gzip.compress(raw, mtime=0))
