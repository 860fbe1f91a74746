"""The one way tests and benchmarks reach third-party traces: read in place, never copied.

Real traces written by upstream tools (HTA, param, Chakra, ASTRA-sim, Kineto, TraceLens) live in a
folder outside this repository, laid out at their upstream paths and listed with their sha256 in its
``MANIFEST.json``. The folder is found from the ``LUMOS_REALDATA`` environment variable, else at
``../shared/realdata`` beside the checkout. Where it is absent, every test that asks for a file is
skipped with one reason that names the variable; the rest of the suite runs. ``tests/REALDATA.md``
lists which phenomenon each file shows and which tests use it.

Tests name traces by phenomenon (:data:`TRACES`) and ask for them inside the test body, a fixture
or a ``skipif`` (:func:`needs_realdata`), never at import time, so collection works without the
folder. Archives are read in place (tar members) or extracted into ``tmp_path``
(:func:`extract_archive`), never into the tree. Benchmarks, outside pytest, call
:func:`realdata_or_exit`.

>>> realdata_root() is None or (realdata_root() / "MANIFEST.json").is_file()
True
"""

from __future__ import annotations

import json
import os
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

ENV_VAR = "LUMOS_REALDATA"
_BESIDE_CHECKOUT = Path(__file__).resolve().parents[2] / "shared" / "realdata"

_HTA = "HolisticTraceAnalysis/tests/data"
_PARAM = "param/et_replay/tests/inputs"

#: Phenomenon -> realdata path (upstream repo folder + upstream path). ``tests/REALDATA.md`` says
#: what each one shows and which tests read it.
TRACES: dict[str, str] = {
    # Kineto, GPU
    "nccl_a100": f"{_HTA}/nccl_parser_config/nccl_data.json.gz",
    "gpu_bound_v100": f"{_HTA}/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "alltoall_4streams": f"{_HTA}/trace_diff/control/control.json.gz",
    "v100_stream_wait_event": f"{_HTA}/df_index_resolver/df_index_resolver.json.gz",
    "sendrecv_5streams_rank0": f"{_HTA}/trace_filter/sampled_rank-0.json.gz",
    "sendrecv_5streams_rank1": f"{_HTA}/trace_filter/sampled_rank-1.json.gz",
    "cuda_event_sync": f"{_HTA}/critical_path/cuda_event_sync/event_sync_trace.json.gz",
    "cuda_event_sync_multi_stream": (
        f"{_HTA}/critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz"
    ),
    "hip_mi250": f"{_HTA}/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "step_on_idle_thread": f"{_HTA}/triton_example/triton_example.json.gz",
    "backward_thread": f"{_HTA}/call_stack/backward_thread.json",
    "gloo_cpu_only": f"{_HTA}/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
    "legacy_2021_v100": (
        "kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
    ),
    "rccl_mi300": "TraceLens/tests/traces/mi300/resnet_act_checkpoint.json.gz",
    "allgather_b200": "TraceLens/tests/traces/b200/eager_trace.json.gz",
    "cuda_sync_mock_h100": "kineto/docs/traces/after_fix_trace.json",
    # ET + Kineto pairs (link)
    "simple_add_kineto": f"{_HTA}/execution_trace/benchmark_simple_add_trace.json.gz",
    "simple_add_et": f"{_HTA}/execution_trace/benchmark_simple_add_et.json.gz",
    "linear_kineto": f"{_PARAM}/linear_kineto.json.gz",
    "linear_et": f"{_PARAM}/linear_et.json.gz",
    "dlrm_kineto_8rank": f"{_PARAM}/dlrm_kineto.tar.gz",
    "dlrm_et_8rank": f"{_PARAM}/dlrm_pytorch_et.tar.gz",
    # PyTorch ET schema versions (1.0.1 is simple_add_et)
    "et_1.0.2": "chakra/tests/data/1.0.2-chakra.0.0.4.json",
    "et_1.1.0": f"{_PARAM}/1.1.0-chakra.0.0.4/resnet_2gpu_et.json.gz",
    "et_1.1.1": f"{_PARAM}/pt2_et.json",
    "et_resnet_1gpu": f"{_PARAM}/1.0.3-chakra.0.0.4/resnet_1gpu_et.json.gz",
    "et_gpt2": f"{_PARAM}/hf_GPT2_et.json.tar.gz",
    # Chakra ETs
    "chakra_pytorch_converted": "chakra/tests/data/chakra.0.et",
}

#: The Kineto traces with ProfilerSteps that tests and benchmarks replay (multi-GPU first).
REPLAY_TRACES: tuple[str, ...] = (
    "nccl_a100",
    "alltoall_4streams",
    "v100_stream_wait_event",
    "sendrecv_5streams_rank0",
    "sendrecv_5streams_rank1",
    "legacy_2021_v100",
    "rccl_mi300",
    "cuda_event_sync",
    "hip_mi250",
    "step_on_idle_thread",
    "backward_thread",
    "gloo_cpu_only",
)

#: The folder holding a matched ET + Kineto pair of one A100 process (and nothing else).
SIMPLE_ADD_DIR = f"{_HTA}/execution_trace"
#: ASTRA-sim's generated one-collective workloads: ``<coll>/<n>npus_1MB/<coll>.<rank>.et``.
ASTRA_MICRO = "astra-sim/examples/workload/microbenchmarks"
ASTRA_MICRO_COLLECTIVES = ("all_gather", "all_reduce", "all_to_all", "reduce_scatter")
ASTRA_MICRO_NPUS = (4, 8, 16)
#: ASTRA-sim's custom ring all-reduce (8 ranks, converted from MSCCL-IR): ``custom_allreduce.<r>.et``.
ASTRA_CUSTOM = "astra-sim/examples/system/custom_collectives/custom_ring_allreduce_8npus_1MB"


def astra_micro(coll: str, npus: int, rank: int | None = None) -> str:
    """Realdata path of an ASTRA-sim microbenchmark folder, or of one rank's file in it."""
    folder = f"{ASTRA_MICRO}/{coll}/{npus}npus_1MB"
    return folder if rank is None else f"{folder}/{coll}.{rank}.et"


def astra_micro_files() -> list[str]:
    """Every microbenchmark rank file, as realdata paths (known without the folder)."""
    return [astra_micro(c, n, r) for c in ASTRA_MICRO_COLLECTIVES for n in ASTRA_MICRO_NPUS
            for r in range(n)]  # fmt: skip


def astra_custom(rank: int | None = None) -> str:
    """Realdata path of the custom all-reduce folder, or of one rank's file in it."""
    return ASTRA_CUSTOM if rank is None else f"{ASTRA_CUSTOM}/custom_allreduce.{rank}.et"


def realdata_root() -> Path | None:
    """The realdata folder, or None where it is absent.

    ``LUMOS_REALDATA`` wins when set (a set but missing folder counts as absent, so a typo skips
    rather than errors in someone else's checkout); otherwise ``../shared/realdata`` next to the
    repository root.
    """
    configured = os.environ.get(ENV_VAR)
    root = Path(configured) if configured else _BESIDE_CHECKOUT
    return root if (root / "MANIFEST.json").is_file() else None


def skip_reason() -> str:
    """Why a realdata test is skipped here (one line, naming the variable)."""
    return (
        f"third-party traces not found: set {ENV_VAR} to a realdata folder "
        f"(default {_BESIDE_CHECKOUT})"
    )


def _located(relpath: str) -> Path | None:
    root = realdata_root()
    if root is None:
        return None
    path = root / relpath
    if not path.exists():
        raise FileNotFoundError(f"{path}: not in the realdata folder {root} (check the path)")
    return path


def realdata(relpath: str) -> Path:
    """Path of one realdata file, given at its upstream path under the folder.

    Skips the calling test (``pytest.skip``) when the folder is absent; a path that is missing
    from a present folder is a bug in the test and fails loudly instead.

    >>> realdata("HolisticTraceAnalysis/tests/data/call_stack/backward_thread.json").name
    'backward_thread.json'
    """
    path = _located(relpath)
    if path is None:
        import pytest

        pytest.skip(skip_reason())
    return path


def trace(name: str) -> Path:
    """``realdata(TRACES[name])``: a trace by its phenomenon name (skips where absent)."""
    return realdata(TRACES[name])


def realdata_or_exit(relpath: str) -> Path:
    """For scripts (benchmarks) outside pytest: the path, or exit (status 1) with the reason."""
    path = _located(relpath)
    if path is None:
        sys.exit(f"{Path(sys.argv[0]).name}: {skip_reason()}")
    return path


_F = TypeVar("_F", bound=Callable[..., Any])


def needs_realdata(fn: _F) -> _F:
    """Decorator: skip the test (with :func:`skip_reason`) where the folder is absent.

    For tests whose inputs are loaded before the body runs (hypothesis strategies, parametrize
    ids); other tests just call :func:`realdata`.
    """
    import pytest

    marked: _F = pytest.mark.skipif(realdata_root() is None, reason=skip_reason())(fn)
    return marked


def extract_archive(relpath: str, dest: Path) -> Path:
    """Extract a realdata tarball into ``dest`` (a ``tmp_path``), never into the tree."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(realdata(relpath)) as tar:
        if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4: refuse links and absolute paths
            tar.extractall(dest, filter="data")
        else:  # pragma: no cover - older 3.11
            tar.extractall(dest)
    return dest


def manifest() -> list[dict[str, Any]]:
    """The folder's ``MANIFEST.json`` entries (skips where the folder is absent)."""
    entries: list[dict[str, Any]] = json.loads(realdata("MANIFEST.json").read_text())
    return entries
