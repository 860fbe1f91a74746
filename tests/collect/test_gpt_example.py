"""The bundled GPT workload's pieces, in this process (one rank; torchrun runs are slow tests)."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from lumos.examples import gpt  # noqa: E402

TINY = ["--layers", "2", "--hidden", "32", "--heads", "2", "--seq", "8", "--batch", "4",
        "--vocab", "64"]  # fmt: skip


def test_pipeline_stages_are_the_ddp_model_cut_in_two():
    cfg = gpt.GPTConfig(vocab=64, seq=8, hidden=32, heads=2, layers=3)
    whole = [p.detach().clone() for p in gpt.build_stages(cfg, 1)[0].parameters()]
    stages = gpt.build_stages(cfg, 2)
    assert len(stages) == 2
    cut = [p.detach() for s in stages for p in s.parameters()]
    assert len(cut) == len(whole) and all(
        torch.equal(a, b) for a, b in zip(cut, whole, strict=True)
    )


def test_config_and_args_validation():
    with pytest.raises(ValueError, match="multiple of heads"):
        gpt.GPTConfig(hidden=30, heads=4)
    with pytest.raises(SystemExit):
        gpt.parse_args(["--batch", "3", "--microbatches", "2"])


def test_batches_are_seeded():
    cfg = gpt.GPTConfig(vocab=64, seq=8, hidden=32, heads=2, layers=1)
    a = next(gpt.batches(cfg, 2, 7, torch.device("cpu")))
    b = next(gpt.batches(cfg, 2, 7, torch.device("cpu")))
    assert torch.equal(a[0], b[0]) and torch.equal(a[0][:, 1:], a[1][:, :-1])


def test_one_process_run_trains_and_reports(monkeypatch, capsys):
    from lumos.collect import free_port

    # Set what the script would otherwise set in os.environ itself, so that it is undone.
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LUMOS_COLLECT_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    assert gpt.main(["--steps", "2", *TINY]) == 0
    assert "gpt ddp on 1 rank(s), cpu: 2 steps" in capsys.readouterr().out


def test_alternate_overrides_parse_into_configuration_b():
    assert gpt.parse_alternate("layers=8, hidden=256") == {"layers": 8, "hidden": 256}
    args = gpt.parse_args(["--mode", "pipeline", "--alternate", "batch=16,microbatches=4"])
    assert args.alternate == {"batch": 16, "microbatches": 4}
    assert (args.batch, args.microbatches, args.b.batch, args.b.microbatches) == (8, 2, 16, 4)
    assert args.b.mode == "pipeline" and args.b.layers == args.layers == 4
    wide = gpt.parse_args(["--alternate", "hidden=256,ffn=512"]).b
    assert (wide.hidden, wide.ffn_mult) == (256, 2)
    assert gpt.config_dict(wide) == {
        "batch": 8,
        "ffn": 512,
        "heads": 4,
        "hidden": 256,
        "layers": 4,
        "microbatches": 2,
        "seq": 64,
        "vocab": 512,
    }
    assert gpt.config_of(wide).ffn_mult == 2
    assert gpt.parse_args([]).b is None  # default behaviour unchanged


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("depth=8", "'depth': unknown key"),
        ("layers", "expected KEY=VALUE"),
        ("layers=0", "positive integer"),
        ("layers=x", "positive integer"),
        ("layers=2,layers=3", "given twice"),
        ("ffn=300", "multiple of hidden"),
        ("ffn=512,ffn_mult=2", "not both"),
        ("microbatches=3", "multiple of microbatches"),
        ("heads=3", "multiple of heads"),
    ],
)
def test_alternate_rejects_bad_overrides(spec, message, capsys):
    with pytest.raises(SystemExit):
        gpt.parse_args(["--alternate", spec])
    assert message in capsys.readouterr().err


def test_one_process_alternating_run_records_both_configurations(monkeypatch, capsys, tmp_path):
    from lumos.collect import free_port
    from lumos.collect.split import find_steps, read_trace, split_run

    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    for k, v in {"DIR": tmp_path / "run", "STEPS": 4, "WARMUP": 2, "WAIT": 0}.items():
        monkeypatch.setenv(f"LUMOS_COLLECT_{k}", str(v))
    assert gpt.main(["--steps", "2", "--alternate", "layers=1", *TINY]) == 0
    out = capsys.readouterr().out
    assert "config A on 1 rank(s), cpu: 3 steps" in out and "config B" in out
    side = json.loads((tmp_path / "run" / "alternate.json").read_text())
    assert side["configs"]["B"]["config"]["layers"] == 1 and side["overrides"] == {"layers": 1}
    steps = find_steps(read_trace(tmp_path / "run" / "rank0.kineto.json.gz"))
    assert [s.label for s in steps] == ["A", "B", "A", "B"]
    got = split_run(tmp_path / "run", {"B": tmp_path / "b"})
    assert got["B"]["alternate"]["kept_steps"] == [s.number for s in steps if s.label == "B"]
