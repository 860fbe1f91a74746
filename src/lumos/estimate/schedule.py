"""Pipeline-parallel schedules: which forward and backward each stage runs, in which order, and an
exact timing of that order.

A schedule is one tuple of :class:`Slot` per pipeline stage (stage ``s`` is pipeline rank ``s``).
Micro-batches and model chunks are stored 0-based, like Python indices, and printed 1-based, like
the papers' figures: ``Slot("F", 0)`` prints ``F1``; with several chunks per stage the chunk is
printed too, ``Slot("B", 2, chunk=1)`` prints ``B3c2``.

=================  =============================================================================
kind               order on stage ``s`` of ``p``, with ``m`` micro-batches
=================  =============================================================================
``gpipe``          every forward, then every backward, both in micro-batch order
``1f1b``           PipeDream-flush / Megatron non-interleaved: ``min(p-s-1, m)`` warm-up forwards,
                   then one forward and one backward in turn, then the remaining backwards
``interleaved``    Megatron interleaved 1F1B, ``v = chunks`` model chunks per stage (chunk ``c``
                   of stage ``s`` is virtual stage ``c*p + s``); needs ``m % p == 0``. Forwards run
                   in groups of ``p`` micro-batches per chunk, chunks ascending; backwards
                   likewise with chunks descending; ``min(2*(p-s-1) + (v-1)*p, v*m)`` warm-up
                   forwards, then one forward and one backward in turn, then the rest
=================  =============================================================================

>>> print(format_schedule(pipeline_schedule(2, 3)))
stage 0: F1 F2 B1 F3 B2 B3
stage 1: F1 B1 F2 B2 F3 B3
>>> format_slots(pipeline_schedule(4, 8)[0])
'F1 F2 F3 F4 B1 F5 B2 F6 B3 F7 B4 F8 B5 B6 B7 B8'

:func:`simulate_schedule` times a schedule exactly (integer nanoseconds) and
:func:`bubble_fraction` reads the idle share off it. With balanced stages and free communication
the bubble fraction is ``(p-1)/(m+p-1)`` for ``gpipe`` and ``1f1b`` and ``(p-1)/(v*m+p-1)`` for
``interleaved`` (the bubble of Megatron's paper, ``(p-1)/m`` and ``(p-1)/(v*m)``, is the same idle
time divided by the busy time instead of the makespan).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from lumos.errors import ConfigError, SimulationError

__all__ = [
    "KINDS",
    "ScheduleTiming",
    "Slot",
    "bubble_fraction",
    "format_schedule",
    "format_slots",
    "pipeline_schedule",
    "simulate_schedule",
]

KINDS = ("gpipe", "1f1b", "interleaved")

Schedule = tuple[tuple["Slot", ...], ...]
Durations = int | Sequence[int | Sequence[int]]


@dataclass(frozen=True, slots=True)
class Slot:
    """One unit of a stage's work: the forward (``"F"``) or backward (``"B"``) pass of one
    micro-batch (0-based) through one model chunk (0-based; always 0 unless interleaved)."""

    phase: Literal["F", "B"]
    microbatch: int
    chunk: int = 0

    def label(self, chunks: int = 1) -> str:
        """``F1`` (1-based); ``F1c2`` when the schedule has more than one chunk per stage."""
        text = f"{self.phase}{self.microbatch + 1}"
        return text if chunks == 1 else f"{text}c{self.chunk + 1}"


def pipeline_schedule(
    stages: int, microbatches: int, kind: str = "1f1b", chunks: int = 1
) -> Schedule:
    """The ordered slots of each of ``stages`` pipeline stages running ``microbatches``
    micro-batches (table in the module docstring). ``chunks`` is the number of model chunks per
    stage, more than 1 only for ``kind="interleaved"``.

    Raises ConfigError naming the key (``pp``, ``microbatches``, ``schedule``, ``chunks``) for a
    value that makes no schedule.
    """
    _check_positive("pp", stages)
    _check_positive("microbatches", microbatches)
    _check_positive("chunks", chunks)
    if kind not in KINDS:
        raise ConfigError(f"schedule={kind!r}: expected one of {', '.join(KINDS)}")
    p, m, v = stages, microbatches, chunks
    if kind != "interleaved":
        if v != 1:
            raise ConfigError(f"chunks={v}: only the interleaved schedule has several chunks")
        return tuple(_one_chunk(p, m, s, kind) for s in range(p))
    if v < 2:
        raise ConfigError("chunks=1: the interleaved schedule needs chunks >= 2 (use 1f1b)")
    if m % p:
        raise ConfigError(
            f"microbatches={m}: the interleaved schedule needs a multiple of pp={p} micro-batches"
        )
    return tuple(_interleaved(p, m, v, s) for s in range(p))


def _check_positive(key: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{key}={value!r}: expected a whole number >= 1")


def _one_chunk(p: int, m: int, s: int, kind: str) -> tuple[Slot, ...]:
    warmup = m if kind == "gpipe" else min(p - s - 1, m)
    slots = [Slot("F", i) for i in range(warmup)]
    for i in range(m - warmup):
        slots += (Slot("F", warmup + i), Slot("B", i))
    slots += (Slot("B", i) for i in range(m - warmup, m))
    return tuple(slots)


def _interleaved(p: int, m: int, v: int, s: int) -> tuple[Slot, ...]:
    total = v * m

    def nth(k: int, phase: Literal["F", "B"]) -> Slot:
        # The k-th forward (backward) of a stage: groups of p micro-batches, each group through
        # every chunk in turn (ascending forward, descending backward), p*v passes per group.
        group, within = divmod(k, p * v)
        chunk = within // p
        return Slot(phase, group * p + within % p, chunk if phase == "F" else v - 1 - chunk)

    warmup = min(2 * (p - s - 1) + (v - 1) * p, total)
    slots = [nth(k, "F") for k in range(warmup)]
    for k in range(total - warmup):
        slots += (nth(warmup + k, "F"), nth(k, "B"))
    slots += (nth(k, "B") for k in range(total - warmup, total))
    return tuple(slots)


def format_slots(slots: Sequence[Slot], chunks: int = 1) -> str:
    """One stage's slots as ``F1 F2 B1 ...`` (see :meth:`Slot.label`)."""
    return " ".join(slot.label(chunks) for slot in slots)


def format_schedule(schedule: Schedule) -> str:
    """The schedule stage by stage, one line each: ``stage 0: F1 F2 F3 F4 B1 F5 ...``; chunks are
    printed (``F1c1``) when any slot is on a chunk other than the first."""
    chunks = _chunk_count(schedule)
    return "\n".join(
        f"stage {s}: {format_slots(slots, chunks)}" for s, slots in enumerate(schedule)
    )


def _chunk_count(schedule: Schedule) -> int:
    return 1 + max((slot.chunk for slots in schedule for slot in slots), default=0)


@dataclass(frozen=True, slots=True)
class ScheduleTiming:
    """When each slot of a schedule runs: ``start_ns[s][k]`` and ``end_ns[s][k]`` belong to
    ``schedule[s][k]``. Every stage is free from time 0; ``makespan_ns`` is the latest end."""

    schedule: Schedule
    start_ns: tuple[tuple[int, ...], ...]
    end_ns: tuple[tuple[int, ...], ...]
    makespan_ns: int

    @property
    def busy_ns(self) -> tuple[int, ...]:
        """Per stage, the time spent running slots."""
        return tuple(
            sum(e - b for b, e in zip(starts, ends, strict=True))
            for starts, ends in zip(self.start_ns, self.end_ns, strict=True)
        )

    @property
    def idle_ns(self) -> tuple[int, ...]:
        """Per stage, the time within the makespan not spent running slots (the bubble)."""
        return tuple(self.makespan_ns - busy for busy in self.busy_ns)


def simulate_schedule(
    schedule: Schedule, fwd_ns: Durations, bwd_ns: Durations, p2p_ns: int = 0
) -> ScheduleTiming:
    """Time ``schedule`` exactly: each stage runs its slots one at a time in its order, each as
    soon as the stage is free and its inputs are there.

    Chunk ``c`` of stage ``s`` is virtual stage ``c*p + s``. The forward of micro-batch ``i`` on
    a virtual stage needs its forward on the previous virtual stage; its backward needs its
    backward on the next virtual stage and its own forward. Crossing from one stage to another
    costs ``p2p_ns`` on top.

    ``fwd_ns`` and ``bwd_ns`` give a slot's duration: one integer for all, one per stage, or per
    stage one per chunk (``fwd_ns[s][c]``). Raises ConfigError for a schedule that is not every
    (phase, micro-batch, chunk) exactly once per stage, or for durations of the wrong shape or
    negative; SimulationError if the stages' orders wait on each other in a circle.
    """
    p, v = _check_schedule(schedule)
    fwd = _duration_table("fwd_ns", fwd_ns, p, v)
    bwd = _duration_table("bwd_ns", bwd_ns, p, v)
    if not isinstance(p2p_ns, int) or isinstance(p2p_ns, bool) or p2p_ns < 0:
        raise ConfigError(f"p2p_ns={p2p_ns!r}: expected a whole number >= 0")
    done: dict[tuple[str, int, int], int] = {}  # (phase, virtual stage, micro-batch) -> end

    def inputs_ready_ns(slot: Slot, s: int) -> int | None:
        """When the inputs of ``slot`` on stage ``s`` are there; None while one is missing."""
        vs = slot.chunk * p + s
        needs = [("F", vs - 1)] if slot.phase == "F" and vs > 0 else []
        if slot.phase == "B":
            needs += [("F", vs)] + ([("B", vs + 1)] if vs < v * p - 1 else [])
        ready = 0
        for phase, dep in needs:
            dep_end = done.get((phase, dep, slot.microbatch))
            if dep_end is None:
                return None
            ready = max(ready, dep_end + (p2p_ns if dep % p != s else 0))
        return ready

    start = [[0] * len(slots) for slots in schedule]
    end = [[0] * len(slots) for slots in schedule]
    nxt = [0] * p  # per stage, the index of its next slot
    free = [0] * p  # per stage, when its last slot ended
    remaining = sum(len(slots) for slots in schedule)
    while remaining:
        progressed = False
        for s in range(p):
            while nxt[s] < len(schedule[s]):
                slot, k = schedule[s][nxt[s]], nxt[s]
                ready = inputs_ready_ns(slot, s)
                if ready is None:
                    break
                start[s][k] = max(ready, free[s])
                end[s][k] = free[s] = (
                    start[s][k] + (fwd if slot.phase == "F" else bwd)[s][slot.chunk]
                )
                done[(slot.phase, slot.chunk * p + s, slot.microbatch)] = end[s][k]
                nxt[s] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            stuck = ", ".join(
                f"stage {s} at {schedule[s][nxt[s]].label(v)}"
                for s in range(p)
                if nxt[s] < len(schedule[s])
            )
            raise SimulationError(f"the pipeline schedule deadlocks: {stuck}")
    return ScheduleTiming(
        schedule=schedule,
        start_ns=tuple(map(tuple, start)),
        end_ns=tuple(map(tuple, end)),
        makespan_ns=max(free),
    )


def _check_schedule(schedule: Schedule) -> tuple[int, int]:
    """(stages, chunks) of a well-formed schedule, else ConfigError."""
    p = len(schedule)
    if p == 0:
        raise ConfigError("pp=0: a pipeline schedule needs at least 1 stage")
    v = _chunk_count(schedule)
    m = 1 + max((slot.microbatch for slots in schedule for slot in slots), default=-1)
    want = sorted((phase, i, c) for phase in ("B", "F") for i in range(m) for c in range(v))
    for s, slots in enumerate(schedule):
        if sorted((x.phase, x.microbatch, x.chunk) for x in slots) != want:
            raise ConfigError(
                f"stage {s} of the pipeline schedule does not run each of the {m} micro-batches' "
                f"forward and backward through each of its {v} chunks exactly once"
            )
    return p, v


def _duration_table(key: str, value: Durations, p: int, v: int) -> tuple[tuple[int, ...], ...]:
    """``value`` as a (stage, chunk) table of non-negative integers, else ConfigError."""
    rows = [value] * p if isinstance(value, int) else value
    if not isinstance(rows, Sequence) or len(rows) != p:
        got = f"{len(rows)} durations" if isinstance(rows, Sequence) else repr(value)
        raise ConfigError(f"{key}: {got} for {p} pipeline stages")
    table = []
    for s, row in enumerate(rows):
        chunk_ns = [row] * v if isinstance(row, int) else row
        if not isinstance(chunk_ns, Sequence) or len(chunk_ns) != v:
            raise ConfigError(f"{key}: stage {s} has {row!r} for {v} chunks")
        if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in chunk_ns):
            raise ConfigError(f"{key}: stage {s} durations {row!r} must be whole numbers >= 0")
        table.append(tuple(chunk_ns))
    return tuple(table)


def bubble_fraction(timing: ScheduleTiming) -> Fraction:
    """The share of stage-time spent idle: total idle time over ``stages * makespan`` (the mean
    over stages of each stage's idle time over the makespan), exact. 0 for an empty makespan."""
    total = len(timing.schedule) * timing.makespan_ns
    return Fraction(sum(timing.idle_ns), total) if total else Fraction(0)
