"""``obfuscate_files``: obfuscate Chakra ETs and Kineto traces of one job, leak-check, write.

Inputs are sniffed by content (like ``lumos info``): Chakra ``.et`` (plain or gzip) and Kineto
JSON (plain or gzip); files, directories and tar archives expand as ``lumos info`` expands
them. Every input is read and every output obfuscated (one :class:`Namer`: one key for the
whole call) and leak-checked (:mod:`lumos.synth.leaks`, against the secrets of *all* inputs of
the call) before anything is written, so a failed check writes nothing. Outputs are
``<prefix>.<rank>.et`` and ``<prefix>.<rank>.json`` (``.json.gz`` for a gzip input), the rank
being the trace's own when every input has a distinct one, else the input's position; each is
written atomically.
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from lumos._io import atomic_write, is_gzip
from lumos.chakra import ChakraTrace, read_chakra, write_chakra
from lumos.errors import ConfigError, InputError
from lumos.ingest.detect import TraceRef, expand_paths
from lumos.synth.leaks import LeakError, find_leak, secrets_of
from lumos.synth.obfuscate_chakra import chakra_strings, obfuscate_chakra
from lumos.synth.obfuscate_kineto import kineto_strings, obfuscate_kineto
from lumos.synth.obfuscate_names import SHAPE_MODES, Namer

__all__ = ["ObfuscatedFile", "obfuscate_files"]


@dataclass(frozen=True)
class ObfuscatedFile:
    """One output: where it came from, where it went, and what was dropped (counts)."""

    source: str
    path: Path
    kind: str
    diagnostics: dict[str, int]


@dataclass
class _Input:
    ref: TraceRef
    rank: int | None
    doc: Any = None  # Kineto: the decoded JSON object
    strings: Any = None  # Kineto: its strings (kineto_strings)
    trace: ChakraTrace | None = None
    gz: bool = False


def _load(ref: TraceRef) -> _Input:
    if ref.kind == "kineto":
        payload = ref.read()
        try:
            doc = msgspec.json.decode(payload)
        except msgspec.DecodeError as exc:
            raise InputError(ref.where, f"not valid JSON: {exc}") from None
        if isinstance(doc, list):
            doc = {"traceEvents": doc}
        if not isinstance(doc, dict):
            raise InputError(ref.where, "a Kineto trace is a JSON object")
        with open(ref.path, "rb") as f:
            gz = ref.member is None and is_gzip(f.read(2))
        dist = doc.get("distributedInfo")
        rank = dist.get("rank") if isinstance(dist, dict) else None
        rank = rank if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0 else None
        return _Input(ref, rank, doc=doc, strings=kineto_strings(doc, payload), gz=gz)
    if ref.kind == "chakra":
        if ref.member is not None:
            raise InputError(ref.where, "Chakra ETs inside archives are not supported; extract it")
        trace = read_chakra(ref.path)
        assert isinstance(trace, ChakraTrace)  # a file path reads as one trace
        rank = trace.rank if trace.rank is not None else trace.metadata.get("rank")
        return _Input(ref, rank if isinstance(rank, int) else None, trace=trace)
    raise InputError(ref.where, "a PyTorch execution trace: obfuscate the Chakra ET "
                                "`lumos convert` writes from it instead")  # fmt: skip


def obfuscate_files(
    paths: list[str | os.PathLike[str]],
    prefix: str | os.PathLike[str],
    *,
    key: str | None = None,
    shapes: str = "keep",
    jitter_pct: float = 0.0,
    seed: int = 0,
) -> list[ObfuscatedFile]:
    """Obfuscate every trace under ``paths`` into ``<prefix>.<rank>.<ext>`` (module docstring).

    ``key`` (else ``$LUMOS_OBFUSCATE_KEY``, else a random key for this call) makes renamed
    names stable across calls; ``shapes`` is one of :data:`SHAPE_MODES`; ``jitter_pct``
    (0 = off) and ``seed`` jitter durations. Raises :class:`LeakError` naming the output file
    and the leaked string when a check fails (nothing is written then).
    """
    if shapes not in SHAPE_MODES:
        raise ConfigError(f"--shapes must be one of {', '.join(SHAPE_MODES)}, not {shapes!r}")
    if not 0.0 <= jitter_pct < 100.0:
        raise ConfigError(f"--jitter must be a percentage in [0, 100), not {jitter_pct}")
    inputs = [_load(r) for r in expand_paths(list(paths))]
    ranks = [i.rank for i in inputs]
    by_rank = None not in ranks and len(set(ranks)) == len(ranks)
    secrets = set()
    for i in inputs:
        strings = i.strings if i.trace is None else chakra_strings(i.trace)
        secrets |= secrets_of(strings)
    namer = Namer(key)
    outputs: list[tuple[ObfuscatedFile, Any]] = []
    for pos, inp in enumerate(inputs):
        r = inp.rank if by_rank else pos
        out: ChakraTrace | bytes
        if inp.trace is not None:
            et, diag = obfuscate_chakra(inp.trace, namer, shapes=shapes,
                                        jitter_pct=jitter_pct, seed=seed + pos)  # fmt: skip
            path = Path(f"{prefix}.{r}.et")
            leak = find_leak(chakra_strings(et), secrets)
            kind, out = "chakra", et
        else:
            data, diag = obfuscate_kineto(inp.doc, namer, shapes=shapes,
                                          jitter_pct=jitter_pct, seed=seed + pos)  # fmt: skip
            path = Path(f"{prefix}.{r}.json" + (".gz" if inp.gz else ""))
            leak = find_leak(data, secrets)
            kind, out = "kineto", data
        if leak is not None:
            raise LeakError(f"{path}: the obfuscated output still holds {leak!r} from the input "
                            f"{inp.ref.where}; nothing was written")  # fmt: skip
        outputs.append((ObfuscatedFile(inp.ref.where, path, kind, diag), out))
    for f, out in outputs:
        if isinstance(out, ChakraTrace):
            write_chakra(out, f.path)
        else:
            with atomic_write(f.path, "wb") as fh:
                if f.path.suffix == ".gz":
                    with gzip.GzipFile(fileobj=fh, mode="wb", mtime=0) as z:
                        z.write(out)
                else:
                    fh.write(out)
    return [f for f, _ in outputs]
