"""A second model family for the bundled workload (``--arch llama``): what a what-if estimate
must also handle, since users train more than one kind of transformer.

Differences from the GPT blocks, each visible in a trace: RMS norm written out in tensor ops
(``pow``, ``mean``, ``rsqrt``, ``mul``) instead of ``layer_norm``; separate bias-free query, key,
value and output projections (``mm``, no ``addmm``); rotary position embedding (slices, ``cat``,
``neg``, ``mul``) instead of a learned position table; a SwiGLU MLP (three bias-free products,
``silu``); and a multi-tensor optimizer (``AdamW(foreach=True)``: one ``_foreach_*`` op per
update for every parameter at once, no per-layer optimizer ops). Shared with GPT: the causal
``scaled_dot_product_attention`` and the training loops.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["LlamaBlock", "LlamaEmbed", "LlamaHead", "RMSNorm"]


class RMSNorm(nn.Module):
    """``x / rms(x) * weight``, in plain tensor ops."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    turned = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + turned * sin


class LlamaBlock(nn.Module):
    """Pre-norm block: rotary causal self-attention then a SwiGLU MLP, both residual."""

    def __init__(self, hidden: int, heads: int, ffn: int, seq: int) -> None:
        super().__init__()
        self.heads = heads
        hd = hidden // heads
        self.norm1 = RMSNorm(hidden)
        self.q = nn.Linear(hidden, hidden, bias=False)
        self.k = nn.Linear(hidden, hidden, bias=False)
        self.v = nn.Linear(hidden, hidden, bias=False)
        self.o = nn.Linear(hidden, hidden, bias=False)
        self.norm2 = RMSNorm(hidden)
        self.gate = nn.Linear(hidden, ffn, bias=False)
        self.up = nn.Linear(hidden, ffn, bias=False)
        self.down = nn.Linear(ffn, hidden, bias=False)
        freq = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
        angle = torch.outer(torch.arange(seq).float(), freq)
        self.register_buffer("cos", torch.cat((angle, angle), dim=-1).cos(), persistent=False)
        self.register_buffer("sin", torch.cat((angle, angle), dim=-1).sin(), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        y = self.norm1(x)
        q, k, v = (p(y).view(b, s, self.heads, h // self.heads).transpose(1, 2)
                   for p in (self.q, self.k, self.v))  # fmt: skip
        cos, sin = self.get_buffer("cos")[:s], self.get_buffer("sin")[:s]
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(att.transpose(1, 2).reshape(b, s, h))
        y = self.norm2(x)
        return x + self.down(F.silu(self.gate(y)) * self.up(y))


class LlamaEmbed(nn.Module):
    """Token embedding only (positions are rotary, inside the blocks)."""

    def __init__(self, vocab: int, hidden: int) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, hidden)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.tok(idx)


class LlamaHead(nn.Module):
    """Final RMS norm, vocabulary projection and the next-token cross-entropy loss."""

    def __init__(self, vocab: int, hidden: int) -> None:
        super().__init__()
        self.norm = RMSNorm(hidden)
        self.out = nn.Linear(hidden, vocab, bias=False)

    def forward(self, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = self.out(self.norm(x))
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())
