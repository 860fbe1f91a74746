"""What each model-size what-if needs to know about the baseline, and the error when it cannot.

A shape what-if re-times ops by mapping their recorded dimensions to the new configuration
(:mod:`lumos.estimate.shapes`): a dimension changes when it equals a quantity that changes, so
the recorded value of every quantity that changes must be known; one that stays the same and
is not known is simply kept. Each key therefore asks for these baseline values:

======================  =====================================================================
``--set``               needs (found in the trace or given by ``--baseline KEY=N``)
======================  =====================================================================
any of them             the trace's tensor shapes (``record_shapes``), and ``tokens``: the
                        tokens per micro-batch (micro-batch size x sequence, read from the
                        shapes as a whole), which tells a token dimension from a feature
                        dimension of the same size (``tokens == ffn`` is common)
``hidden``              ``hidden``; ``ffn``, which follows ``hidden`` unless ``--set ffn=N``
                        is given (Megatron's default); ``heads`` when the trace has
                        attention ops (the head width ``hidden / heads`` changes)
``ffn``                 ``ffn``
``heads``               ``heads`` and ``hidden`` (the head width); ``microbatch_size`` when
                        the trace has batched products (``bmm``, ``baddbmm``: their
                        ``micro-batch size x heads`` matrices)
``seq``                 ``seq`` (the micro-batch size follows as ``tokens / seq``)
``microbatch_size``     ``microbatch_size`` (the sequence follows as ``tokens / b``);
                        ``heads`` when the trace has batched products
======================  =====================================================================

The micro-batch size and the sequence are never needed by a change to ``hidden``, ``ffn`` or
``heads``: their activations are recognised by position, ``(b, s, ...)`` and ``(b, heads, s,
x)`` being any leading pair whose product is ``tokens``. A value set to what the trace
recorded changes nothing and needs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

from lumos.errors import ConfigError
from lumos.estimate.baseline import IN_LAYERS, Baseline
from lumos.graph.model import Workload

__all__ = ["asks", "missing", "require"]

_HEAD_WIDTH = "attention's head width is hidden / heads"
_BMM = "batched attention products (bmm) hold micro-batch size x heads matrices"
#: Why a key is needed, by ``(key, the key changed)``; the changed key itself needs no why.
_WHY = {
    ("ffn", "hidden"): "the FFN width follows hidden unless --set ffn=N is given",
    ("heads", "hidden"): _HEAD_WIDTH,
    ("hidden", "heads"): _HEAD_WIDTH,
    ("microbatch_size", "heads"): _BMM,
    ("heads", "microbatch_size"): _BMM,
}
_TOKENS = ("tokens per micro-batch (micro-batch size x sequence), which tells a token dimension "
           "from a feature dimension of the same size")  # fmt: skip
_FOLLOWS = {"seq": "the micro-batch size follows as tokens / seq",
            "microbatch_size": "the sequence follows as tokens / microbatch_size"}  # fmt: skip
#: the keys whose re-timing maps recorded shapes (the sizes read inside the layer blocks)
_SHAPE_KEYS = IN_LAYERS
_ATTENTION = ("scaled_dot_product", "flash_attention", "efficient_attention", "_attention_",
              "aten::bmm", "aten::baddbmm")  # fmt: skip
_BATCHED = ("aten::bmm", "aten::baddbmm")


def _has(workload: Workload, needles: tuple[str, ...]) -> bool:
    return any(n in name for g in workload.graphs for name in g.names for n in needles)


def asks(
    workload: Workload, changes: Mapping[str, int], base: Baseline | None = None
) -> list[tuple[str, str]]:
    """``(key, why)`` of each baseline value the shape keys in ``changes`` use, the most
    direct first (see the module docstring; ``why`` is empty for a key changed itself). With
    ``base``, a key set to the value it already has is no change and asks for nothing."""
    known = _known(base) if base is not None else {}
    changed = [k for k in _SHAPE_KEYS if k in changes and changes[k] != known.get(k, -1)]
    wanted: list[tuple[str, str]] = []
    for key in changed:
        wanted.append((key, _FOLLOWS.get(key, "")))
        also = {"hidden": ["ffn"] + (["heads"] if _has(workload, _ATTENTION) else []),
                "heads": ["hidden"] + (["microbatch_size"] if _has(workload, _BATCHED) else []),
                "microbatch_size": ["heads"] if _has(workload, _BATCHED) else []}  # fmt: skip
        wanted += [(k, _WHY[k, key]) for k in also.get(key, [])]
    if changed:
        wanted.append(("tokens", _TOKENS))
    out: list[tuple[str, str]] = []
    for key, why in wanted:
        if key not in (k for k, _ in out):
            out.append((key, why))
    return out


def _known(base: Baseline) -> dict[str, int]:
    d = base.dims()
    return {"tokens": d.tokens, "hidden": d.hidden, "ffn": d.ffn, "heads": d.heads,
            "seq": d.seq, "microbatch_size": d.microbatch_size}  # fmt: skip


def missing(
    workload: Workload, base: Baseline, changes: Mapping[str, int]
) -> list[tuple[str, str]]:
    """Those of :func:`asks` that ``base`` does not hold."""
    known = _known(base)
    return [(k, why) for k, why in asks(workload, changes, base) if known[k] <= 0]


def require(workload: Workload, base: Baseline, changes: Mapping[str, int]) -> None:
    """Refuse ``changes`` when a value they need is not known: one :class:`ConfigError` line
    naming the first such key, why it is needed, how to give it (and any other key that
    will be needed after it)."""
    if not any(k in changes for k in _SHAPE_KEYS):
        return
    if all(g.task_dims_idx is None or not g.dims for g in workload.graphs):
        raise ConfigError(
            "the trace records no tensor shapes (Input Dims), which re-timing ops for other "
            "model sizes reads: record it with the profiler's record_shapes=True"
        )
    gaps = missing(workload, base, changes)
    if not gaps:
        return
    key, why = gaps[0]
    fix = f"give --baseline {key}=N"
    if key == "tokens":
        fix += " (or both --baseline microbatch_size=N and --baseline seq=N)"
    if key in base.withheld:
        fix = (f"give --baseline layers=N to accept the repeated blocks `lumos layers` lists, "
               f"or --baseline {key}=N")  # fmt: skip
    more = f" (then also {', '.join(k for k, _ in gaps[1:])})" if len(gaps) > 1 else ""
    raise ConfigError(
        f"needs the baseline's {key}{f' ({why})' if why else ''}, which the trace does not "
        f"show ({base.how.get(key, 'no evidence')}); {fix}{more}"
    )
