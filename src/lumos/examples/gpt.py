"""The bundled workload: a small GPT-style model trained data-parallel or as a pipeline.

Run it under torchrun (``lumos demo`` does this for you)::

    python -m torch.distributed.run --nproc-per-node 2 -m lumos.examples.gpt --mode ddp
    python -m torch.distributed.run --nproc-per-node 2 -m lumos.examples.gpt --mode pipeline

or on one process (``python -m lumos.examples.gpt``; DDP with a world of one). On CPU it uses
gloo, on GPU NCCL (one GPU per rank, ``LOCAL_RANK``). The training loop is wrapped in
:func:`lumos.collect.collector`, so under ``lumos collect`` it records each rank's traces and
otherwise runs untraced. Seeds are fixed: parameters are identical on every rank, each DP rank
draws its own batches, and every pipeline stage draws the same batches.

``ddp``: every rank holds the whole model; gradients are all-reduced in buckets overlapping
backward (small buckets, so a tiny model still shows several collectives).
``pipeline``: one stage per rank: rank 0 holds the embedding and the first ``layers / world``
blocks, the next ranks the next blocks, the last rank also the loss; each step runs
``--microbatches`` forward passes (activations sent rank r -> r + 1), then the backward passes
(activation gradients sent r + 1 -> r), GPipe style. On one rank it is the whole model with
gradients accumulated over the micro-batches (a pipeline of one stage).

``--alternate KEY=VALUE[,KEY=VALUE...]`` (keys: ``layers hidden ffn_mult ffn heads seq batch
microbatches vocab stages``; ``ffn`` is the MLP width, a multiple of ``hidden``; ``stages``
runs a pipeline on fewer ranks, the others idle) builds a second
configuration B, the flags' configuration A with those overrides, each with its own model,
optimizer and DDP wrapper or pipeline stages, and runs steps A, B, A, B, ... so both see the same
machine speed. Each step is one profiler step whose work runs inside a
``record_function("config:A")`` (or ``config:B``) annotation; rank 0 also writes
``alternate.json`` (:data:`ALTERNATE_FILE`) with both configurations into the run directory under
``lumos collect``. :mod:`lumos.collect.split` cuts such a run into one run per configuration.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lumos.collect._torch import import_torch
from lumos.errors import MissingDependencyError

try:
    import_torch("the bundled GPT workload")
except MissingDependencyError as exc:  # run as a script: one line, not a traceback
    raise SystemExit(f"lumos: error: {exc}") from None

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.profiler import record_function

from lumos.collect import CollectConfig, collector

SEED = 1234
#: Prefix of the annotation that wraps each step of an alternating run (``config:A``).
CONFIG_MARKER = "config:"
#: File rank 0 writes into the run directory of an alternating run: both configurations.
ALTERNATE_FILE = "alternate.json"
#: ``--alternate`` keys, each the name of the command-line flag it overrides (``ffn`` aside).
ALTERNATE_KEYS = ("layers", "hidden", "ffn_mult", "ffn", "heads", "seq", "batch", "microbatches",
                  "vocab", "stages")  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class GPTConfig:
    """Model sizes; the defaults make a CPU step of roughly 100-300 ms on one thread."""

    vocab: int = 512
    seq: int = 64
    hidden: int = 128
    heads: int = 4
    layers: int = 4
    ffn_mult: int = 4
    arch: str = "gpt"

    def __post_init__(self) -> None:
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of heads ({self.heads})")


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention then an MLP, both residual."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.heads = cfg.heads
        self.ln1 = nn.LayerNorm(cfg.hidden)
        self.qkv = nn.Linear(cfg.hidden, 3 * cfg.hidden)
        self.proj = nn.Linear(cfg.hidden, cfg.hidden)
        self.ln2 = nn.LayerNorm(cfg.hidden)
        self.fc1 = nn.Linear(cfg.hidden, cfg.ffn_mult * cfg.hidden)
        self.fc2 = nn.Linear(cfg.ffn_mult * cfg.hidden, cfg.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(h, dim=2)
        q, k, v = (t.view(b, s, self.heads, h // self.heads).transpose(1, 2) for t in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, s, h))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Embed(nn.Module):
    """Token plus learned position embedding."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.tok = nn.Embedding(cfg.vocab, cfg.hidden)
        self.pos = nn.Embedding(cfg.seq, cfg.hidden)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        return self.tok(idx) + self.pos(pos)


class Head(nn.Module):
    """Final norm, vocabulary projection and the next-token cross-entropy loss."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(cfg.hidden)
        self.out = nn.Linear(cfg.hidden, cfg.vocab, bias=False)

    def forward(self, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = self.out(self.ln(x))
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def build_stages(cfg: GPTConfig, num_stages: int) -> list[nn.Sequential]:
    """The model cut into ``num_stages`` consecutive stages (1 = whole model but the head).

    The same seed builds the same parameters whatever the cut, so stage ``i`` of a pipeline run
    equals the matching layers of a data-parallel run.
    """
    torch.manual_seed(SEED)
    layers: list[nn.Module]
    if cfg.arch == "llama":
        from lumos.examples.llama import LlamaBlock, LlamaEmbed

        ffn = cfg.ffn_mult * cfg.hidden
        layers = [LlamaEmbed(cfg.vocab, cfg.hidden),
                  *(LlamaBlock(cfg.hidden, cfg.heads, ffn, cfg.seq) for _ in range(cfg.layers))]  # fmt: skip
    else:
        layers = [Embed(cfg), *(Block(cfg) for _ in range(cfg.layers))]
    if cfg.layers < num_stages:
        raise SystemExit(f"{num_stages} pipeline stages need at least as many layers, "
                         f"got --layers {cfg.layers}")  # fmt: skip
    # the blocks split evenly (the first stages take one more when they do not divide), the
    # embedding goes with the first stage
    per, extra = divmod(cfg.layers, num_stages)
    cut = [1 + i * per + min(i, extra) for i in range(num_stages + 1)]
    cut[0] = 0
    return [nn.Sequential(*layers[cut[i] : cut[i + 1]]) for i in range(num_stages)]


def batches(cfg: GPTConfig, batch: int, seed: int, device: torch.device):
    """An endless, seeded stream of (tokens, next-token targets)."""
    gen = torch.Generator().manual_seed(seed)
    while True:
        data = torch.randint(0, cfg.vocab, (batch, cfg.seq + 1), generator=gen)
        yield data[:, :-1].to(device), data[:, 1:].to(device)


def _setup() -> tuple[int, int, torch.device]:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if torch.cuda.is_available():
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        device, backend = torch.device("cuda", local), "nccl"
    else:
        device, backend = torch.device("cpu"), "gloo"
    if "MASTER_ADDR" not in os.environ:  # run without torchrun: a world of one
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="0", RANK="0", WORLD_SIZE="1")
    dist.init_process_group(backend, rank=rank, world_size=world)
    return rank, world, device


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train_ddp(cfg: GPTConfig, args: argparse.Namespace, device: torch.device) -> list[float]:
    """Data-parallel training; returns each step's wall time in seconds."""
    parallel, step = _ddp_trainer(cfg, args, device)
    return _loop(args, parallel, step, device)


Step = Callable[[], None]


def _ddp_trainer(
    cfg: GPTConfig, args: argparse.Namespace, device: torch.device
) -> tuple[dict[str, int], Step]:
    """The data-parallel model, optimizer and DDP wrapper; returns (parallel degrees, step)."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank, world = dist.get_rank(), dist.get_world_size()
    body = build_stages(cfg, 1)[0]
    torch.manual_seed(SEED)
    model = _Whole(body, _head(cfg)).to(device)
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None,
              bucket_cap_mb=args.bucket_mb)  # fmt: skip
    opt = _optimizer(cfg, ddp.parameters())
    data = batches(cfg, args.batch, SEED + rank, device)
    return {"dp": world}, lambda: _ddp_step(ddp, opt, data, not args.plain)


def _head(cfg: GPTConfig) -> nn.Module:
    if cfg.arch == "llama":
        from lumos.examples.llama import LlamaHead

        return LlamaHead(cfg.vocab, cfg.hidden)
    return Head(cfg)


def _optimizer(cfg: GPTConfig, params) -> torch.optim.Optimizer:
    """AdamW: per-parameter ops for GPT, multi-tensor (``foreach``) ops for Llama."""
    return torch.optim.AdamW(params, lr=1e-3, foreach=True if cfg.arch == "llama" else None)


def _phase(name: str, spans: bool) -> Any:
    """A ``record_function`` span, or nothing (``--plain``: as a script that adds none)."""
    return record_function(name) if spans else contextlib.nullcontext()


def _ddp_step(ddp: nn.Module, opt: torch.optim.Optimizer, data, spans: bool) -> None:
    x, y = next(data)
    with _phase("forward", spans):
        loss = ddp(x, y)
    with _phase("backward", spans):
        loss.backward()
    with _phase("optimizer", spans):
        opt.step()
        opt.zero_grad(set_to_none=True)


class _Whole(nn.Module):
    """Body plus head as one module, so DDP wraps a single forward(x, y) -> loss."""

    def __init__(self, body: nn.Module, head: nn.Module) -> None:
        super().__init__()
        self.body = body
        self.head = head

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x), y)


def train_pipeline(cfg: GPTConfig, args: argparse.Namespace, device: torch.device) -> list[float]:
    """GPipe-style training over send/recv, one stage per rank; returns each step's wall time (s)."""
    parallel, step = _pipeline_trainer(cfg, args, device)
    return _loop(args, parallel, step, device)


def _pipeline_trainer(
    cfg: GPTConfig, args: argparse.Namespace, device: torch.device
) -> tuple[dict[str, int], Step]:
    """This rank's pipeline stage and optimizer; returns (parallel degrees, step)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    stages = args.stages or world
    if stages > world:
        raise SystemExit(f"--stages {stages}: more stages than ranks ({world})")
    if rank >= stages:
        return {"pp": stages, "num_microbatches": args.microbatches}, dist.barrier
    first, last = rank == 0, rank == stages - 1
    stage = build_stages(cfg, stages)[rank].to(device)
    torch.manual_seed(SEED + 1)
    head = _head(cfg).to(device) if last else None
    params = list(stage.parameters()) + (list(head.parameters()) if head is not None else [])
    opt = _optimizer(cfg, params)
    data = batches(cfg, args.batch, SEED, device)
    mb = args.batch // args.microbatches
    shape = (mb, cfg.seq, cfg.hidden)
    spans = not args.plain

    def step() -> None:
        x, y = next(data)
        xs, ys = x.split(mb), y.split(mb)
        kept: list[tuple[torch.Tensor | None, torch.Tensor]] = []
        with _phase("forward", spans):
            for i in range(args.microbatches):
                if first:
                    inp, out = None, stage(xs[i])
                else:
                    inp = torch.empty(shape, device=device)
                    dist.recv(inp, src=rank - 1)
                    inp.requires_grad_(True)
                    out = stage(inp)
                if last:
                    assert head is not None
                    out = head(out, ys[i]) / args.microbatches
                else:
                    dist.send(out.detach().contiguous(), dst=rank + 1)
                kept.append((inp, out))
        with _phase("backward", spans):
            for inp, out in kept:
                if last:
                    out.backward()
                else:
                    grad = torch.empty(shape, device=device)
                    dist.recv(grad, src=rank + 1)
                    out.backward(grad)
                if not first:
                    assert inp is not None and inp.grad is not None
                    dist.send(inp.grad.contiguous(), dst=rank - 1)
        with _phase("optimizer", spans):
            opt.step()
            opt.zero_grad(set_to_none=True)
        if stages < world:
            dist.barrier()

    return {"pp": stages, "num_microbatches": args.microbatches}, step


def _loop(args: argparse.Namespace, parallel: dict[str, int], step, device) -> list[float]:
    cfg = CollectConfig.from_env()
    steps = max(args.steps, cfg.total_steps if cfg else 0)
    times: list[float] = []
    with collector(cfg, parallel=parallel) as col:
        for _ in range(steps):
            t0 = time.perf_counter()
            step()
            _sync(device)
            times.append(time.perf_counter() - t0)
            col.step()
    return times


def train_alternating(
    args_a: argparse.Namespace, args_b: argparse.Namespace, device: torch.device
) -> dict[str, list[float]]:
    """Configurations A and B trained in one job, steps alternating A, B, A, ...; returns each
    configuration's step wall times (s). Each step runs inside ``record_function("config:X")``.

    The manifest's ``parallel`` is A's; B's degrees are in ``alternate.json`` (rank 0 writes it
    into the run directory before the first step).
    """
    trainer = _ddp_trainer if args_a.mode == "ddp" else _pipeline_trainer
    built = {"A": trainer(config_of(args_a), args_a, device),
             "B": trainer(config_of(args_b), args_b, device)}  # fmt: skip
    cfg = CollectConfig.from_env()
    if cfg is not None and dist.get_rank() == 0:
        write_alternate_record(cfg.run_dir, args_a, args_b, {k: v[0] for k, v in built.items()})
    steps = max(args_a.steps, cfg.total_steps if cfg else 0)
    times: dict[str, list[float]] = {"A": [], "B": []}
    with collector(cfg, parallel=built["A"][0]) as col:
        for i in range(steps):
            label = "AB"[i % 2]
            t0 = time.perf_counter()
            with record_function(CONFIG_MARKER + label):
                built[label][1]()
                _sync(device)
            times[label].append(time.perf_counter() - t0)
            col.step()
    return times


def config_of(args: argparse.Namespace) -> GPTConfig:
    """The model sizes the parsed flags ask for."""
    return GPTConfig(vocab=args.vocab, seq=args.seq, hidden=args.hidden, heads=args.heads,
                     layers=args.layers, ffn_mult=args.ffn_mult, arch=args.arch)  # fmt: skip


def config_dict(args: argparse.Namespace) -> dict[str, int]:
    """One configuration in ``--alternate`` keys (``ffn`` as the MLP width, not ``ffn_mult``)."""
    out = {k: int(getattr(args, k)) for k in ALTERNATE_KEYS if k not in ("ffn", "ffn_mult")}
    if not out["stages"]:  # one per rank
        del out["stages"]
    out["ffn"] = int(args.ffn_mult * args.hidden)
    return dict(sorted(out.items()))


def write_alternate_record(
    run_dir: Path,
    args_a: argparse.Namespace,
    args_b: argparse.Namespace,
    parallel: dict[str, dict[str, int]],
) -> Path:
    """``alternate.json``: mode, marker prefix, and per configuration its sizes, the ``--alternate``
    overrides (B only), the parallel degrees and the flags that run it on its own."""
    from lumos._io import atomic_write

    doc = {
        "format": "lumos.alternate", "version": 1, "mode": args_a.mode, "marker": CONFIG_MARKER,
        "order": ["A", "B"],
        "configs": {
            label: {"config": config_dict(a), "parallel": parallel[label], "flags": flags_of(a)}
            for label, a in (("A", args_a), ("B", args_b))
        },
        "overrides": args_a.alternate,
    }  # fmt: skip
    path = Path(run_dir) / ALTERNATE_FILE
    with atomic_write(path) as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    return path


def flags_of(args: argparse.Namespace) -> list[str]:
    """Command-line flags that run this one configuration alone (no ``--alternate``)."""
    out = ["--mode", args.mode, "--arch", args.arch] + (["--plain"] if args.plain else [])
    for k in ("batch", "microbatches", "layers", "hidden", "ffn_mult", "heads", "seq", "vocab"):
        out += [f"--{k.replace('_', '-')}", str(getattr(args, k))]
    if args.stages:
        out += ["--stages", str(args.stages)]
    return out


def parse_alternate(spec: str) -> dict[str, int]:
    """``"layers=8,hidden=256"`` -> ``{"layers": 8, "hidden": 256}``; ValueError on bad input."""
    out: dict[str, int] = {}
    for item in spec.split(","):
        key, sep, value = item.strip().partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key or not value.strip():
            raise ValueError(f"{item.strip()!r}: expected KEY=VALUE, e.g. layers=8")
        if key not in ALTERNATE_KEYS:
            raise ValueError(f"{key!r}: unknown key (known: {', '.join(ALTERNATE_KEYS)})")
        if key in out:
            raise ValueError(f"{key!r} given twice")
        try:
            n = int(value)
        except ValueError:
            raise ValueError(f"{key}={value.strip()}: expected a positive integer") from None
        if n < 1:
            raise ValueError(f"{key}={n}: expected a positive integer")
        out[key] = n
    if "ffn" in out and "ffn_mult" in out:
        raise ValueError("give ffn (MLP width) or ffn_mult, not both")
    return out


def alternate_args(args: argparse.Namespace, overrides: dict[str, int]) -> argparse.Namespace:
    """Configuration B: a copy of ``args`` with ``overrides`` applied (ValueError when invalid).

    ``ffn`` is the MLP width and must be a multiple of B's ``hidden``.
    """
    b = argparse.Namespace(**vars(args))
    for k, v in overrides.items():
        if k != "ffn":
            setattr(b, k, v)
    if "ffn" in overrides:
        if overrides["ffn"] % b.hidden:
            raise ValueError(f"ffn={overrides['ffn']} must be a multiple of hidden ({b.hidden})")
        b.ffn_mult = overrides["ffn"] // b.hidden
    _check(b, "B")
    return b


def _check(args: argparse.Namespace, what: str) -> None:
    if args.batch % args.microbatches:
        raise ValueError(f"{what}: batch ({args.batch}) must be a multiple of microbatches "
                         f"({args.microbatches})")  # fmt: skip
    if args.hidden % args.heads:
        raise ValueError(
            f"{what}: hidden ({args.hidden}) must be a multiple of heads ({args.heads})"
        )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The flags; with ``--alternate``, ``args.alternate`` holds the overrides (else None) and
    ``args.b`` configuration B's flags."""
    p = argparse.ArgumentParser(
        prog="python -m lumos.examples.gpt", description=__doc__.split("\n")[0]
    )
    p.add_argument("--mode", choices=("ddp", "pipeline"), default="ddp")
    p.add_argument("--plain", action="store_true",
                   help="no forward/backward/optimizer record_function spans")  # fmt: skip
    p.add_argument("--arch", choices=("gpt", "llama"), default="gpt",
                   help="model family: GPT blocks, or Llama-style (RMS norm, rotary, SwiGLU, "
                   "multi-tensor AdamW); see lumos.examples.llama")  # fmt: skip
    p.add_argument(
        "--steps", type=int, default=5, help="iterations (at least what collection needs)"
    )
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--microbatches", type=int, default=2, help="pipeline mode only")
    p.add_argument("--stages", type=int, default=0,
                   help="pipeline mode: stages on ranks 0..N-1, the other ranks idle (they meet "
                   "the stages at a barrier after each step); 0: one per rank")  # fmt: skip
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--vocab", type=int, default=512)
    p.add_argument("--ffn-mult", type=int, default=4, help="MLP width as a multiple of hidden")
    p.add_argument("--bucket-mb", type=float, default=1.0, help="DDP gradient bucket size")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads per rank")
    p.add_argument("--alternate", default=None, metavar="KEY=VALUE[,KEY=VALUE...]",
                   help="also build configuration B (these flags changed) and alternate steps "
                   f"A, B, A, ...; keys: {' '.join(ALTERNATE_KEYS)}")  # fmt: skip
    args = p.parse_args(argv)
    if args.batch % args.microbatches:
        p.error(
            f"--batch ({args.batch}) must be a multiple of --microbatches ({args.microbatches})"
        )
    args.b = None
    if args.alternate is not None:
        try:
            args.alternate = parse_alternate(args.alternate)
            args.b = alternate_args(args, args.alternate)
        except ValueError as exc:
            p.error(f"--alternate: {exc}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = config_of(args)
    rank, world, device = _setup()
    try:
        if args.b is not None:
            runs = train_alternating(args, args.b, device)
        else:
            train = train_ddp if args.mode == "ddp" else train_pipeline
            runs = {"": train(cfg, args, device)}
    finally:
        dist.destroy_process_group()
    for label, times in runs.items():
        if rank == 0 and times:
            ms = sorted(t * 1e3 for t in times[1:] or times)
            what = f" config {label}" if label else ""
            print(f"gpt {args.mode}{what} on {world} rank(s), {device.type}: {len(times)} steps, "
                  f"median {ms[len(ms) // 2]:.1f} ms/step", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
