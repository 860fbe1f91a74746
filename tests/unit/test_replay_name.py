"""``lumos.replay`` names a function and a module: both uses work in one session."""

from __future__ import annotations

import lumos


def test_lumos_replay_is_callable_after_the_module_was_imported():
    graph = lumos.build_graph(lumos.read_kineto(lumos.example_trace_path()))
    first = lumos.replay(graph)  # the function, imported lazily
    from lumos.replay import build_workload  # the module: now the package attribute

    assert callable(build_workload)
    again = lumos.replay(graph)
    assert again.result.makespan_ns == first.result.makespan_ns
    assert lumos.replay.write_chrome_trace is not None  # attributes of the module stay
