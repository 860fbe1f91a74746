"""Scenarios: the configuration a what-if asks about, parsed from ``--set KEY=VALUE``.

==============================  ===============================================================
key                             meaning
==============================  ===============================================================
``dp=N``                        data-parallel group of N ranks: the collectives of the job-wide
                                process group are re-timed for N participants by the
                                communication model (per-rank compute and gradient bucket sizes
                                unchanged)
``straggler=RANK:FACTOR``       every task of RANK but its communication, and its CPU overhead,
                                take FACTOR times as long (repeat for several ranks)
``link=RANK:FACTOR``            RANK's network is FACTOR times slower: every collective it takes
                                part in runs FACTOR times as long (communication model)
``layers=N``                    N transformer layers in all (copies or drops each rank's layer
                                blocks; gradients grow with the parameters)
``hidden=N``, ``ffn=N``,        model sizes: ops re-timed from their recorded shapes by a cost
``heads=N``, ``seq=N``,         model fitted on the trace (``ffn`` follows ``hidden`` unless
``microbatch_size=N``           given)
``microbatches=N``              N micro-batches per step in a pipeline run (same micro-batch
                                size; the traced schedule is kept)
``pp=N``                        pipeline stages: a multiple of the traced ones (each stage
                                split, layers spread evenly; :mod:`lumos.estimate.stages`) or
                                a divisor (neighbours merged; :mod:`lumos.estimate.merge`)
``schedule=gpipe|1f1b``         a pipeline run's micro-batches in another order (the traced
                                order is kept unless this is given)
``schedule=interleaved``        interleaved 1F1B: each rank holds ``chunks`` model chunks
``chunks=N``                    (virtual stages; default 2; :mod:`lumos.estimate.interleave`)
==============================  ===============================================================

The model keys (``layers`` to ``pp``) are applied by :mod:`lumos.estimate.reshape` against the
baseline configuration found in the trace (:mod:`lumos.estimate.baseline`); each model size asks
only for the baseline values its re-timing uses (:mod:`lumos.estimate.needs`).

``--sweep KEY=V1,V2,...`` gives one scenario per value (on top of the ``--set`` ones).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from lumos.errors import ConfigError

__all__ = ["KEYS", "MODEL_KEYS", "Scenario", "parse_scenario", "parse_sweep"]

MODEL_KEYS = ("layers", "hidden", "ffn", "heads", "seq", "microbatches", "microbatch_size", "pp")
KEYS = ("dp", "straggler", "link", *MODEL_KEYS, "schedule", "chunks")


@dataclass(frozen=True, kw_only=True)
class Scenario:
    """One configuration to estimate; the empty scenario is the baseline."""

    dp: int | None = None
    straggler: tuple[tuple[int, float], ...] = ()
    link: tuple[tuple[int, float], ...] = ()
    #: Model keys (``layers``, ``hidden``...) and their new values, in the order given.
    model: tuple[tuple[str, int], ...] = ()
    #: Pipeline schedule to re-order micro-batches into (None: as traced).
    schedule: str | None = None
    #: Model chunks per rank of the interleaved schedule (None: 2).
    chunks: int | None = None

    def __post_init__(self) -> None:
        for key, value in self.model:
            if value < 1:
                raise ConfigError(f"{key}={value}: expected a positive integer")
        if self.chunks is not None and self.chunks < 2:
            raise ConfigError(f"chunks={self.chunks}: the interleaved schedule needs chunks >= 2")
        if self.dp is not None and self.dp < 1:
            raise ConfigError(f"dp={self.dp}: the data-parallel group needs at least 1 rank")
        for key, pairs in (("straggler", self.straggler), ("link", self.link)):
            for rank, factor in pairs:
                if rank < 0 or not factor > 0:
                    raise ConfigError(f"{key}={rank}:{factor}: expected RANK>=0 and FACTOR>0")

    @property
    def is_baseline(self) -> bool:
        return self == Scenario()

    @property
    def needs_comm_model(self) -> bool:
        """Whether communication must be re-timed (not replayed as traced)."""
        return self.dp is not None or bool(self.link)

    @property
    def label(self) -> str:
        """``dp=16 straggler=3:1.5`` (``baseline`` for the empty scenario)."""
        parts = [] if self.dp is None else [f"dp={self.dp}"]
        parts += [f"straggler={r}:{_num(f)}" for r, f in self.straggler]
        parts += [f"link={r}:{_num(f)}" for r, f in self.link]
        parts += [f"{k}={v}" for k, v in self.model]
        parts += [] if self.schedule is None else [f"schedule={self.schedule}"]
        parts += [] if self.chunks is None else [f"chunks={self.chunks}"]
        return " ".join(parts) or "baseline"

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {}
        if self.dp is not None:
            out["dp"] = self.dp
        if self.straggler:
            out["straggler"] = {str(r): f for r, f in self.straggler}
        if self.link:
            out["link"] = {str(r): f for r, f in self.link}
        out.update(self.model)
        if self.schedule is not None:
            out["schedule"] = self.schedule
        if self.chunks is not None:
            out["chunks"] = self.chunks
        return out


def _num(f: float) -> str:
    return f"{f:g}"


def _rank_factor(key: str, value: str) -> tuple[int, float]:
    rank, sep, factor = value.partition(":")
    try:
        if not sep:
            raise ValueError
        return int(rank), float(factor)
    except ValueError:
        raise ConfigError(f"--set {key}={value}: expected {key}=RANK:FACTOR, e.g. 3:1.5") from None


def _apply(s: Scenario, key: str, value: str) -> Scenario:
    if key == "dp":
        try:
            return replace(s, dp=int(value))
        except ValueError:
            raise ConfigError(f"--set dp={value}: expected an integer number of ranks") from None
    if key == "straggler":
        return replace(s, straggler=(*s.straggler, _rank_factor(key, value)))
    if key == "link":
        return replace(s, link=(*s.link, _rank_factor(key, value)))
    if key == "schedule":
        from lumos.estimate.pipeline import SCHEDULES

        if value not in SCHEDULES:
            raise ConfigError(f"--set schedule={value}: known schedules: {', '.join(SCHEDULES)}")
        return replace(s, schedule=value)
    if key == "chunks":
        try:
            return replace(s, chunks=int(value))
        except ValueError:
            raise ConfigError(f"--set chunks={value}: expected an integer") from None
    if key in MODEL_KEYS:
        try:
            v = int(value)
        except ValueError:
            raise ConfigError(f"--set {key}={value}: expected an integer") from None
        return replace(s, model=(*((k, x) for k, x in s.model if k != key), (key, v)))
    raise ConfigError(f"--set {key}=...: unknown key (known: {', '.join(KEYS)})")


def _split(spec: str, flag: str) -> tuple[str, str]:
    key, sep, value = spec.partition("=")
    if not sep or not key or not value:
        raise ConfigError(f"{flag} {spec!r}: expected KEY=VALUE, e.g. dp=16")
    return key.strip(), value.strip()


def parse_scenario(sets: Sequence[str]) -> Scenario:
    """``["dp=16", "straggler=3:1.5"]`` -> a :class:`Scenario` (ConfigError on bad input).

    >>> parse_scenario(["dp=16", "link=2:2"]).label
    'dp=16 link=2:2'
    """
    s = Scenario()
    for spec in sets:
        s = _apply(s, *_split(spec, "--set"))
    return _complete(s)


def _complete(s: Scenario) -> Scenario:
    """``s`` once every key is set (checks between keys given in any order)."""
    if s.chunks is not None and s.schedule != "interleaved":
        raise ConfigError(f"chunks={s.chunks}: needs --set schedule=interleaved")
    return s


def parse_sweep(base: Scenario, sweeps: Sequence[str]) -> list[Scenario]:
    """One scenario per value of each ``KEY=V1,V2,...`` (applied on top of ``base``).

    >>> [s.label for s in parse_sweep(Scenario(), ["dp=16,32"])]
    ['dp=16', 'dp=32']
    """
    out = []
    for spec in sweeps:
        key, values = _split(spec, "--sweep")
        for v in values.split(","):
            if v.strip():
                out.append(_complete(_apply(base, key, v.strip())))
    return out
