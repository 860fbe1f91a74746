"""Converted ET sets shared by the ASTRA-sim tests (converted once per session, in tmp dirs).

The two real runs of issue #12: the bundled 2-rank gloo demo (part of lumos) and the 8-rank
DLRM run (``dlrm_kineto_8rank``, read in place through tests/realdata.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.realdata import trace

from lumos.chakra import read_chakra
from lumos.chakra.trace import ChakraTrace
from lumos.convert import convert
from lumos.convert_astra import AstraConvertReport, convert_astra
from lumos.examples_data import example_run_dir


def by_rank(prefix: Path) -> dict[int, ChakraTrace]:
    """rank -> trace of ``<prefix>.<rank>.et``."""
    w = read_chakra(prefix)
    return {r: w[r] for r in w.ranks}


@pytest.fixture(scope="session")
def demo_default(tmp_path_factory) -> Path:
    """The bundled demo run converted with the defaults (the issue's 'aborts' row)."""
    out = tmp_path_factory.mktemp("demo_default") / "demo"
    convert([example_run_dir()], out, workers=1)
    return out


@pytest.fixture(scope="session")
def demo_astra(tmp_path_factory) -> tuple[Path, AstraConvertReport]:
    """The bundled demo run converted with --target astra-sim."""
    out = tmp_path_factory.mktemp("demo_astra") / "demo"
    return out, convert_astra([example_run_dir()], out, workers=1)


@pytest.fixture(scope="session")
def dlrm_astra(tmp_path_factory) -> tuple[Path, AstraConvertReport]:
    """The 8-rank DLRM run converted with --target astra-sim."""
    out = tmp_path_factory.mktemp("dlrm_astra") / "dlrm"
    return out, convert_astra([trace("dlrm_kineto_8rank")], out, workers=1)


@pytest.fixture(scope="session")
def synth_demo_astra(tmp_path_factory) -> Path:
    """A synthetic workload drawn from a model of the demo run, written with --target
    astra-sim (2 ranks, 2 steps)."""
    from lumos.synth.files import write_sample
    from lumos.synth.fit import fit_model
    from lumos.synth.sample import plan_sample

    out = tmp_path_factory.mktemp("synth_astra") / "synth"
    model = fit_model([example_run_dir()], workers=1)
    write_sample(plan_sample(model, steps=2, seed=3), out, target="astra-sim")
    return out
