"""Pipeline schedules (gpipe, 1f1b, interleaved) and their exact timing."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lumos.errors import ConfigError, SimulationError
from lumos.estimate.schedule import (
    ScheduleTiming,
    Slot,
    bubble_fraction,
    format_schedule,
    format_slots,
    pipeline_schedule,
    simulate_schedule,
)

SETTINGS = settings(max_examples=150, deadline=None)
stages = st.integers(1, 8)
durations = st.integers(0, 1000)


def parse(text: str) -> tuple[Slot, ...]:
    """``"F1 B1 F2c2"`` -> slots (1-based micro-batch and chunk, as printed)."""
    slots = []
    for word in text.split():
        mb, _, chunk = word[1:].partition("c")
        slots.append(Slot(word[0], int(mb) - 1, int(chunk or 1) - 1))
    return tuple(slots)


# --- orders -------------------------------------------------------------------------------------


def test_1f1b_pp4_mb8_rank0_is_the_known_order():
    """The issue's known answer: 3 warm-up forwards, 1F1B, then 3 cool-down backwards."""
    schedule = pipeline_schedule(4, 8, "1f1b")
    assert format_slots(schedule[0]) == "F1 F2 F3 F4 B1 F5 B2 F6 B3 F7 B4 F8 B5 B6 B7 B8"


def test_1f1b_pp4_mb8_every_stage():
    assert format_schedule(pipeline_schedule(4, 8)).splitlines() == [
        "stage 0: F1 F2 F3 F4 B1 F5 B2 F6 B3 F7 B4 F8 B5 B6 B7 B8",
        "stage 1: F1 F2 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 F8 B6 B7 B8",
        "stage 2: F1 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 F8 B7 B8",
        "stage 3: F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7 F8 B8",
    ]


def test_1f1b_with_fewer_microbatches_than_stages_warms_up_with_all_of_them():
    """min(p-s-1, m) warm-up forwards: stages 0 and 1 of 4 with 2 micro-batches warm up with both,
    stage 2 with one, stage 3 with none."""
    assert format_schedule(pipeline_schedule(4, 2)).splitlines() == [
        "stage 0: F1 F2 B1 B2",
        "stage 1: F1 F2 B1 B2",
        "stage 2: F1 F2 B1 B2",
        "stage 3: F1 B1 F2 B2",
    ]


def test_gpipe_runs_every_forward_then_every_backward():
    assert format_schedule(pipeline_schedule(2, 3, "gpipe")).splitlines() == [
        "stage 0: F1 F2 F3 B1 B2 B3",
        "stage 1: F1 F2 F3 B1 B2 B3",
    ]


def test_interleaved_pp4_mb8_v2_follows_megatrons_rule():
    """Stage s warms up with 2*(p-s-1) + (v-1)*p forwards (10 on stage 0, 4 on stage 3); the
    k-th forward is micro-batch (k // (p*v))*p + k % p on chunk (k % (p*v)) // p, backwards
    likewise with the chunks in reverse."""
    rows = format_schedule(pipeline_schedule(4, 8, "interleaved", chunks=2)).splitlines()
    assert rows[0] == (
        "stage 0: F1c1 F2c1 F3c1 F4c1 F1c2 F2c2 F3c2 F4c2 F5c1 F6c1 F7c1 B1c2 F8c1 B2c2 F5c2 B3c2 "
        "F6c2 B4c2 F7c2 B1c1 F8c2 B2c1 B3c1 B4c1 B5c2 B6c2 B7c2 B8c2 B5c1 B6c1 B7c1 B8c1"
    )
    assert rows[3] == (
        "stage 3: F1c1 F2c1 F3c1 F4c1 F1c2 B1c2 F2c2 B2c2 F3c2 B3c2 F4c2 B4c2 F5c1 B1c1 F6c1 B2c1 "
        "F7c1 B3c1 F8c1 B4c1 F5c2 B5c2 F6c2 B6c2 F7c2 B7c2 F8c2 B8c2 B5c1 B6c1 B7c1 B8c1"
    )


def test_slots_are_stored_0_based_and_printed_1_based():
    first = pipeline_schedule(2, 2, "interleaved", chunks=2)[0][0]
    assert first == Slot("F", 0, 0)
    assert first.label() == "F1"
    assert first.label(chunks=2) == "F1c1"
    assert parse("F1 B2c3") == (Slot("F", 0, 0), Slot("B", 1, 2))


@given(p=stages, m=st.integers(1, 32), kind=st.sampled_from(["gpipe", "1f1b"]))
@SETTINGS
def test_every_stage_runs_each_forward_and_backward_once_in_microbatch_order(p, m, kind):
    for slots in pipeline_schedule(p, m, kind):
        assert [x.microbatch for x in slots if x.phase == "F"] == list(range(m))
        assert [x.microbatch for x in slots if x.phase == "B"] == list(range(m))


@given(p=stages, m=st.integers(1, 32))
@SETTINGS
def test_1f1b_keeps_at_most_p_minus_s_microbatches_in_flight(p, m):
    """What 1F1B is for: stage s holds the activations of min(p-s, m) micro-batches at most
    (GPipe holds all m)."""
    for s, slots in enumerate(pipeline_schedule(p, m)):
        assert max_in_flight(slots) == min(p - s, m)
    assert {max_in_flight(slots) for slots in pipeline_schedule(p, m, "gpipe")} == {m}


def max_in_flight(slots: tuple[Slot, ...]) -> int:
    level = peak = 0
    for slot in slots:
        level += 1 if slot.phase == "F" else -1
        peak = max(peak, level)
    return peak


# --- timing -------------------------------------------------------------------------------------


def test_two_stages_with_communication_by_hand():
    """p=2, m=2, forward 1, backward 2, p2p 1. Stage 0: F1 F2 B1 B2; stage 1: F1 B1 F2 B2.
    s0 F1 0-1, F2 1-2; s1 F1 (1+1) 2-3, B1 3-5, F2 5-6, B2 6-8; s0 B1 (5+1) 6-8, B2 (8+1) 9-11."""
    timing = simulate_schedule(pipeline_schedule(2, 2), 1, 2, p2p_ns=1)
    assert timing.start_ns == ((0, 1, 6, 9), (2, 3, 5, 6))
    assert timing.end_ns == ((1, 2, 8, 11), (3, 5, 6, 8))
    assert timing.makespan_ns == 11
    assert timing.busy_ns == (6, 6)
    assert timing.idle_ns == (5, 5)
    assert bubble_fraction(timing) == Fraction(10, 22)


def test_per_chunk_durations_and_no_p2p_within_a_stage():
    """One stage, two chunks, one micro-batch: F1c1 F1c2 B1c2 B1c1 back to back with the
    chunk's own durations; passing between chunks of one stage costs no p2p."""
    schedule = pipeline_schedule(1, 1, "interleaved", chunks=2)
    assert format_schedule(schedule) == "stage 0: F1c1 F1c2 B1c2 B1c1"
    timing = simulate_schedule(schedule, [[1, 2]], [[3, 4]], p2p_ns=5)
    assert timing.start_ns == ((0, 1, 3, 7),)
    assert timing.end_ns == ((1, 3, 7, 10),)
    assert bubble_fraction(timing) == 0


def test_per_stage_durations_slowest_stage_sets_the_pace():
    """GPipe, 2 stages of forward 1 and 3, backward 0, m=3: stage 1 runs its forwards back to
    back from t=1 (1-4, 4-7, 7-10)."""
    timing = simulate_schedule(pipeline_schedule(2, 3, "gpipe"), [1, 3], [0, 0])
    assert timing.start_ns[1][:3] == (1, 4, 7)
    assert timing.makespan_ns == 10


@given(
    p=stages,
    m=st.integers(1, 32),
    f=durations,
    b=durations,
    kind=st.sampled_from(["gpipe", "1f1b"]),
)
@SETTINGS
def test_balanced_free_communication_bubble_is_p_minus_1_over_m_plus_p_minus_1(p, m, f, b, kind):
    """Bubble = idle stage-time / (stages x makespan); exact for any forward/backward ratio, and
    the makespan is (m+p-1)(f+b)."""
    timing = simulate_schedule(pipeline_schedule(p, m, kind), f, b)
    assert timing.makespan_ns == (m + p - 1) * (f + b)
    if f + b:
        assert bubble_fraction(timing) == Fraction(p - 1, m + p - 1)


@given(p=stages, groups=st.integers(1, 6), v=st.integers(2, 4), f=durations, b=durations)
@SETTINGS
def test_interleaved_bubble_is_p_minus_1_over_v_m_plus_p_minus_1(p, groups, v, f, b):
    """With per-chunk forward f and backward b the makespan is (v*m+p-1)(f+b): the idle time is
    (p-1)(f+b), 1/v of the non-interleaved bubble for the same per-stage work. Over the busy time
    that is Megatron's (p-1)/(v*m); over the makespan (p-1)/(v*m+p-1)."""
    m = p * groups
    timing = simulate_schedule(pipeline_schedule(p, m, "interleaved", v), f, b)
    assert timing.makespan_ns == (v * m + p - 1) * (f + b)
    assert set(timing.idle_ns) == {(p - 1) * (f + b)}
    if f + b:
        assert bubble_fraction(timing) == Fraction(p - 1, v * m + p - 1)


@given(p=stages, m=st.integers(1, 16), f=durations, b=durations, c=st.integers(0, 100))
@SETTINGS
def test_gpipe_makespan_with_communication(p, m, f, b, c):
    """Each of the p-1 hops is crossed once on the way down and once on the way back."""
    timing = simulate_schedule(pipeline_schedule(p, m, "gpipe"), f, b, p2p_ns=c)
    assert timing.makespan_ns == (m + p - 1) * (f + b) + 2 * (p - 1) * c


@st.composite
def timed_schedules(draw):
    p = draw(stages)
    kind = draw(st.sampled_from(["gpipe", "1f1b", "interleaved"]))
    v = draw(st.integers(2, 3)) if kind == "interleaved" else 1
    m = p * draw(st.integers(1, 4)) if kind == "interleaved" else draw(st.integers(1, 12))
    table = st.lists(st.lists(durations, min_size=v, max_size=v), min_size=p, max_size=p)
    return pipeline_schedule(p, m, kind, v), draw(table), draw(table), draw(st.integers(0, 50))


@given(timed_schedules())
@SETTINGS
def test_every_slot_starts_as_soon_as_its_stage_and_inputs_allow(case):
    """The definition, checked slot by slot from the outside on uneven stages and chunks."""
    schedule, fwd, bwd, c = case
    timing = simulate_schedule(schedule, fwd, bwd, p2p_ns=c)
    check_tight(timing, fwd, bwd, c)


def check_tight(timing: ScheduleTiming, fwd, bwd, c: int) -> None:
    p = len(timing.schedule)
    v = 1 + max(x.chunk for slots in timing.schedule for x in slots)
    end = {
        (x.phase, x.chunk * p + s, x.microbatch): timing.end_ns[s][k]
        for s, slots in enumerate(timing.schedule)
        for k, x in enumerate(slots)
    }
    for s, slots in enumerate(timing.schedule):
        for k, x in enumerate(slots):
            vs = x.chunk * p + s
            ready = [timing.end_ns[s][k - 1] if k else 0]
            if x.phase == "F" and vs > 0:
                ready.append(end["F", vs - 1, x.microbatch] + (c if p > 1 else 0))
            if x.phase == "B":
                ready.append(end["F", vs, x.microbatch])
                if vs < v * p - 1:
                    ready.append(end["B", vs + 1, x.microbatch] + (c if p > 1 else 0))
            assert timing.start_ns[s][k] == max(ready)
            dur = (fwd if x.phase == "F" else bwd)[s][x.chunk]
            assert timing.end_ns[s][k] == timing.start_ns[s][k] + dur
    assert timing.makespan_ns == max(max(ends) for ends in timing.end_ns)


def test_a_circular_order_is_a_simulation_error():
    """Stage 1 wants F2 first, but stage 0 sends F2 only after B1, which needs stage 1's B1."""
    schedule = (parse("F1 B1 F2 B2"), parse("F2 F1 B1 B2"))
    with pytest.raises(SimulationError, match="deadlocks: stage 0 at B1, stage 1 at F2"):
        simulate_schedule(schedule, 1, 1)


def test_interleaved_timing_with_communication_is_exact_and_repeatable():
    """pp=4, 8 micro-batches, 2 chunks, forward 3, backward 7, p2p 2: the first micro-batch's
    forward and the last one's backward cross all v*p - 1 = 7 virtual-stage boundaries, each a
    stage change, so the makespan is (m*v + p - 1)(f + b) + 2(v*p - 1)c = 19*10 + 2*7*2 = 218;
    a second run gives the same timing, slot by slot."""
    schedule = pipeline_schedule(4, 8, "interleaved", chunks=2)
    timing = simulate_schedule(schedule, 3, 7, 2)
    assert timing.makespan_ns == 218
    assert timing.busy_ns == (8 * 2 * 10,) * 4
    assert simulate_schedule(schedule, 3, 7, 2) == timing


def test_stages_without_slots_have_one_chunk_and_take_no_time():
    """Two stages with nothing to run: one chunk (so one duration per stage and chunk is the
    right shape), every stage idle for an empty makespan, each printed without slots."""
    empty: tuple[tuple[Slot, ...], ...] = ((), ())
    assert format_schedule(empty) == "stage 0: \nstage 1: "
    timing = simulate_schedule(empty, [[5], [7]], [[1], [2]])
    assert timing == ScheduleTiming(empty, ((), ()), ((), ()), 0)
    assert bubble_fraction(timing) == 0
    with pytest.raises(ConfigError, match="fwd_ns: stage 0 has \\[5, 6\\] for 1 chunks"):
        simulate_schedule(empty, [[5, 6], [7, 8]], 1)


# --- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0, 8), "pp=0"),
        ((4, 0), "microbatches=0"),
        ((4, 8, "1f1b", 0), "chunks=0"),
        ((True, 8), "pp=True"),
        ((4, 8, "zero-bubble"), "schedule='zero-bubble'"),
        ((4, 8, "1f1b", 2), "chunks=2: only the interleaved"),
        ((4, 8, "interleaved", 1), "chunks=1: the interleaved schedule needs chunks >= 2"),
        ((4, 6, "interleaved", 2), "microbatches=6: .* multiple of pp=4"),
    ],
)
def test_bad_configurations_name_the_key(args, message):
    with pytest.raises(ConfigError, match=message):
        pipeline_schedule(*args)


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ((), "pp=0"),
        ((parse("F1 B1"), parse("F1 F2 B1 B2")), "stage 0 .* 2 micro-batches"),
        ((parse("F1 B1 B1"),), "stage 0 .* exactly once"),
    ],
)
def test_malformed_schedules_are_config_errors(schedule, message):
    with pytest.raises(ConfigError, match=message):
        simulate_schedule(schedule, 1, 1)


@pytest.mark.parametrize(
    ("fwd", "bwd", "p2p", "message"),
    [
        ([1, 2, 3], 1, 0, "fwd_ns: 3 durations for 2 pipeline stages"),
        (1, [[1, 2], [1, 2]], 0, "bwd_ns: stage 0 has \\[1, 2\\] for 1 chunks"),
        (-1, 1, 0, "fwd_ns: stage 0 durations .* >= 0"),
        (1.5, 1, 0, "fwd_ns: 1.5 for 2 pipeline stages"),
        ([1, 2.5], 1, 0, "fwd_ns: stage 1 has 2.5 for 1 chunks"),
        (1, 1, -1, "p2p_ns=-1"),
    ],
)
def test_bad_durations_name_the_argument(fwd, bwd, p2p, message):
    with pytest.raises(ConfigError, match=message):
        simulate_schedule(pipeline_schedule(2, 2), fwd, bwd, p2p)
