"""Shape re-timing and baseline detection: known answers on hand-made shapes and the bundled run."""

from __future__ import annotations

import numpy as np
import pytest

from lumos.errors import ConfigError
from lumos.estimate.baseline import detect_baseline
from lumos.estimate.reshape import _op_params, reshape_workload
from lumos.estimate.shapes import Dims, ShapeModel, _Mapper, fit_line, map_dims, work_of
from lumos.examples_data import example_run_dir
from lumos.replay import build_workload

# the bundled run: micro-batch 8, sequence 64, hidden 128, FFN 512, 4 heads, vocabulary 512
OLD = Dims(microbatch_size=8, seq=64, hidden=128, ffn=512, heads=4, vocab=512)
WIDE = Dims(microbatch_size=8, seq=64, hidden=256, ffn=1024, heads=4, vocab=512)


@pytest.fixture(scope="module")
def example():
    workload, _ = build_workload([str(example_run_dir())])
    return workload


def test_work_of_matrix_products_attention_and_elementwise():
    assert work_of("aten::addmm", [[384], [512, 128], [128, 384], [], []]) == 2 * 512 * 128 * 384
    assert work_of("aten::mm", [[512, 512], [512, 128]]) == 2 * 512 * 512 * 128
    assert work_of("aten::bmm", [[32, 64, 32], [32, 32, 64]]) == 2 * 32 * 64 * 32 * 64
    attn = [[8, 4, 64, 32], [8, 4, 64, 32], [8, 4, 64, 32]]
    assert (
        work_of("aten::_scaled_dot_product_flash_attention_for_cpu", attn)
        == 4 * 8 * 4 * 64 * 64 * 32
    )
    assert work_of("aten::gelu", [[8, 64, 512], []]) == 8 * 64 * 512
    assert work_of("aten::_foreach_add_", [[[384, 128], [384]], []]) == 384 * 128 + 384
    assert work_of("aten::view", [[8, 64, 128], []]) == 0  # touches no data


def test_tokens_equal_to_ffn_are_told_apart_by_role():
    """Micro-batch x sequence = 512 = FFN = vocabulary: an activation's leading 512 is tokens
    (unchanged), a weight's 512 is the FFN inside a layer and the vocabulary outside."""
    m = _Mapper(OLD, WIDE)
    fc2 = map_dims("aten::addmm", [[128], [512, 512], [512, 128], [], []], m, inside=True)
    assert fc2[:3] == [[256], [512, 1024], [1024, 256]]
    head = map_dims("aten::mm", [[512, 128], [128, 512]], m, inside=False)
    assert head == [[512, 256], [256, 512]]
    act = map_dims("aten::gelu", [[8, 64, 512], []], m, inside=True)
    assert act[0] == [8, 64, 1024]
    scores = map_dims("aten::_softmax", [[8, 4, 64, 64], [], []], m, inside=True)
    assert scores[0] == [8, 4, 64, 64]
    longer = _Mapper(OLD, Dims(microbatch_size=8, seq=128, hidden=128, ffn=512, heads=4, vocab=512))
    assert map_dims("aten::_softmax", [[8, 4, 64, 64]], longer, True)[0] == [8, 4, 128, 128]


def test_cost_lines_and_the_dispatch_floor():
    a, c = fit_line(np.array([1.0, 2.0, 4.0, 4.0]), np.array([15.0, 25.0, 45.0, 45.0]))
    assert a == pytest.approx(5.0) and c == pytest.approx(10.0)
    model = ShapeModel(fits={"aten::mm": (5.0, 10.0)}, floor_ns=2.0)
    assert model.scaled("aten::mm", 45.0, 4.0, 8.0) == pytest.approx(85.0)
    # no fit: the floor stays, the rest scales with work
    assert model.scaled("aten::gelu", 12.0, 100.0, 200.0) == pytest.approx(22.0)


def test_parameters_of_ops():
    assert _op_params("aten::addmm", [[384], [512, 128], [128, 384], [], []]) == 128 * 384 + 384
    assert _op_params("aten::mm", [[512, 128], [128, 512]]) == 128 * 512
    assert _op_params("aten::embedding", [[512, 128], [8, 64], [], [], []]) == 512 * 128
    assert _op_params("aten::layer_norm", [[8, 64, 128], [], [128], [128], [], []]) == 256


def test_the_bundled_run_configuration_is_found(example):
    base = detect_baseline(example)
    assert base.values == {"layers": 2, "hidden": 128, "ffn": 512, "heads": 4, "seq": 64,
                           "microbatch_size": 8, "tokens": 512, "vocab": 512,
                           "microbatches": 1, "pp": 1, "dp": 2}  # fmt: skip
    assert base.dims() == OLD.complete() and OLD.complete().tokens == 512
    given = detect_baseline(example, {"hidden": 96})
    assert given.values["hidden"] == 96 and given.how["hidden"] == "given (--baseline)"
    with pytest.raises(ConfigError, match="--baseline"):
        detect_baseline(example, {"depth": 3})


def test_reshape_records_its_edits_and_rejects_what_it_cannot_do(example):
    base = detect_baseline(example)
    wide, edits = reshape_workload(example, base, {"hidden": 256})
    names = [e.name for e in edits]
    assert names == ["hidden 128 -> 256", "communication re-sized"]
    assert edits[0].tasks_retimed > 1000
    # every rank's parameters: layers 2 x (4h^2 + 2hf + 9h + 2f... ) grow about 4x with h and f
    assert "gradient bytes x3." in edits[1].detail
    assert sum(g.tasks.dur_ns.sum() for g in wide.graphs) > sum(
        g.tasks.dur_ns.sum() for g in example.graphs
    )
    deeper, edits = reshape_workload(example, base, {"layers": 4})
    assert sum(g.num_tasks for g in deeper.graphs) == example.num_tasks + edits[0].tasks_added
    assert edits[0].name == "layers 2 -> 4" and edits[0].tasks_removed == 0
    assert edits[0].tasks_added == (62 + 132 + 180) * 2 * 3 * 2  # 2 layers x 3 steps x 2 ranks
    with pytest.raises(ConfigError, match="pp=2"):
        reshape_workload(example, base, {"pp": 2})
    with pytest.raises(ConfigError, match="micro-batch blocks"):
        reshape_workload(example, base, {"microbatches": 4})


def test_lumos_layers_and_estimate_with_model_keys(tmp_path, capsys):
    import json

    from lumos.cli.main import main

    run = str(example_run_dir())
    assert main(["layers", run, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["baseline"]["layers"] == {"value": 2, "how": "2, 2 repeated blocks per rank x pp 1"}
    phases = doc["ranks"][0]["phases"]
    assert {k: (v["layers"], v["ops_per_layer"]) for k, v in phases.items()} == {
        "forward": (2, 62), "backward": (2, 132), "optimizer": (2, 180)}  # fmt: skip
    assert main(["layers", run]) == 0
    text = capsys.readouterr().out
    assert "hidden          128" in text and "outside the layers" in text

    out = tmp_path / "est"
    assert main(["estimate", run, "-o", str(out), "--sweep", "layers=1,4"]) == 0
    doc = json.loads((out / "estimate.json").read_text())
    assert [r["config"]["label"] for r in doc["rows"]] == ["baseline", "layers=1", "layers=4"]
    base, one, four = (r["step_ns"] for r in doc["rows"])
    assert one < base < four
    assert doc["baseline"]["hidden"]["value"] == 128
    assert doc["rows"][2]["edits"][0]["edit"] == "layers 2 -> 4"
    csv = (out / "estimate.csv").read_text().splitlines()
    assert csv[0].startswith("config,step_ns,change_pct") and len(csv) == 4
    assert main(["estimate", run, "-o", str(out), "--set", "layers=x"]) == 1
    assert "expected an integer" in capsys.readouterr().err


def test_lumos_report_of_an_estimate_directory_shows_the_rows_and_a_chart(tmp_path):
    from lumos.cli.main import main

    out = tmp_path / "est"
    assert main(["estimate", str(example_run_dir()), "-o", str(out), "--sweep", "layers=1,4"]) == 0
    assert main(["report", str(out)]) == 0
    html = (out / "report.html").read_text()
    section = html[html.index("What-if estimates") :]
    assert "layers=4" in section and "layers 2 -&gt; 4" in section
    assert section.count("<svg") == 1  # the stacked breakdown per scenario
    assert "Where the time goes, per scenario" in section
