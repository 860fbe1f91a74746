"""CollectConfig: validation and the LUMOS_COLLECT_* environment round trip."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lumos.collect import CollectConfig
from lumos.errors import ConfigError


def test_unset_env_means_disabled():
    assert CollectConfig.from_env({}) is None
    assert CollectConfig.from_env({"LUMOS_COLLECT_DIR": "  "}) is None


def test_defaults_from_env_with_only_a_dir(tmp_path):
    cfg = CollectConfig.from_env({"LUMOS_COLLECT_DIR": str(tmp_path)})
    assert cfg == CollectConfig(run_dir=tmp_path)
    assert (cfg.steps, cfg.warmup, cfg.wait, cfg.execution_trace) == (2, 1, 1, False)
    assert cfg.memory is True  # allocations are recorded unless asked not to
    assert cfg.total_steps == 4


@given(
    steps=st.integers(1, 50),
    warmup=st.integers(0, 5),
    wait=st.integers(0, 5),
    et=st.booleans(),
    stack=st.booleans(),
    memory=st.booleans(),
)
def test_env_round_trip(steps, warmup, wait, et, stack, memory):
    cfg = CollectConfig(
        run_dir=Path("/tmp/x/run"), steps=steps, warmup=warmup, wait=wait,
        execution_trace=et, with_stack=stack, memory=memory,
    )  # fmt: skip
    env = cfg.to_env()
    assert all(k.startswith("LUMOS_COLLECT_") and isinstance(v, str) for k, v in env.items())
    assert CollectConfig.from_env(env) == cfg


def test_relative_dir_is_made_absolute_for_the_ranks(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = CollectConfig(run_dir=Path("run")).to_env()
    assert env["LUMOS_COLLECT_DIR"] == str(tmp_path / "run")


@pytest.mark.parametrize(
    ("var", "value", "needle"),
    [
        ("STEPS", "two", "LUMOS_COLLECT_STEPS='two' is not an integer"),
        ("ET", "maybe", "LUMOS_COLLECT_ET='maybe' is not a boolean"),
        ("STEPS", "0", "steps must be at least 1"),
        ("WARMUP", "-1", "cannot be negative"),
    ],
)
def test_bad_env_values_raise_config_error(tmp_path, var, value, needle):
    env = {"LUMOS_COLLECT_DIR": str(tmp_path), f"LUMOS_COLLECT_{var}": value}
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(")):
        CollectConfig.from_env(env)


@pytest.mark.parametrize("value", ["1", "true", "YES", "on"])
def test_truthy_et(tmp_path, value):
    cfg = CollectConfig.from_env({"LUMOS_COLLECT_DIR": str(tmp_path), "LUMOS_COLLECT_ET": value})
    assert cfg is not None and cfg.execution_trace
