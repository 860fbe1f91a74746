"""The bundled GPT workload's pieces, in this process (one rank; torchrun runs are slow tests)."""

from __future__ import annotations

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
