"""Record ``trace.kineto.json.gz``: a model whose activations are flattened to (tokens, width).

Four residual MLP blocks (layer norm, hidden -> ffn, GELU, ffn -> hidden) over a batch of
8 sequences of 64 tokens flattened to 512 rows before the embedding, so no tensor of the
recording has a (batch, sequence) pair of dimensions: the tokens per micro-batch (512) can be
read from the shapes, the micro-batch size and the sequence length cannot. The FFN width
(512) equals the token count on purpose (the ambiguity a model-size what-if must resolve).

Run from the repository root: ``python tests/data/flat_tokens_cpu/record.py`` (README.md here
says when and where it was run). ``--hidden N --ffn N -o PATH`` records another width (a
measured target for ``lumos estimate --set hidden=N``), not kept in the repository.
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import tempfile
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F
from torch.profiler import ProfilerActivity, profile, schedule

BATCH, SEQ, VOCAB, LAYERS = 8, 64, 1000, 4
HIDDEN, FFN = 128, 512  # set by --hidden / --ffn


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(HIDDEN)
        self.fc1 = nn.Linear(HIDDEN, FFN)
        self.fc2 = nn.Linear(FFN, HIDDEN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.blocks = nn.Sequential(*(Block() for _ in range(LAYERS)))
        self.norm = nn.LayerNorm(HIDDEN)
        self.head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.embed(ids.reshape(-1)))  # (tokens, hidden) from here on
        return F.cross_entropy(self.head(self.norm(x)), targets.reshape(-1))


def main() -> None:
    global HIDDEN, FFN
    p = argparse.ArgumentParser()
    p.add_argument("--hidden", type=int, default=HIDDEN)
    p.add_argument("--ffn", type=int, default=FFN)
    p.add_argument("-o", "--out", type=Path, default=Path(__file__).parent / "trace.kineto.json.gz")
    args = p.parse_args()
    HIDDEN, FFN = args.hidden, args.ffn
    torch.manual_seed(1234)
    torch.set_num_threads(1)
    model = Model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ))
    targets = torch.randint(0, VOCAB, (BATCH, SEQ))
    out = args.out
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "trace.json"
        sched = schedule(wait=1, warmup=1, active=3, repeat=1)
        with profile(activities=[ProfilerActivity.CPU], schedule=sched, record_shapes=True,
                     on_trace_ready=lambda p: p.export_chrome_trace(str(raw))) as prof:  # fmt: skip
            for _ in range(5):
                opt.zero_grad(set_to_none=True)
                model(ids, targets).backward()
                opt.step()
                prof.step()
        with (
            raw.open("rb") as src,
            out.open("wb") as f,
            gzip.GzipFile(fileobj=f, mode="wb", mtime=0) as dst,
        ):
            shutil.copyfileobj(src, dst)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
