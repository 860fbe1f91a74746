"""The report's opening section: ``lumos advise``'s verdict and opportunities (``advice.json``
beside the replay), so the page answers "why is my step slow, what should I change" first."""

from __future__ import annotations

from collections.abc import Callable
from html import escape
from typing import Any

from lumos.errors import InputError

__all__ = ["advice_section"]


def advice_section(doc: dict[str, Any], table: Callable[[list[dict[str, Any]]], str]) -> str:
    """``<section>`` with the verdict line, the shares of the slowest rank and the ranked
    opportunities (``table`` renders rows); InputError when ``doc`` is not an advice."""
    from lumos.advise.run import headline

    need = ("bound", "shares", "slowest_rank", "step_ns", "opportunities")
    if not all(k in doc for k in need) or not isinstance(doc["opportunities"], list):
        raise InputError("advice.json", f"not a lumos advice (needs {', '.join(need)})")
    shares = doc["shares"].get(str(doc["slowest_rank"]), {})
    share_rows = [{"cause": k, "share of the critical path": f"{v * 100:.0f} %"}
                  for k, v in shares.items()]  # fmt: skip
    opp_rows = [{"what-if": o["name"], "step_ns": o["step_ns"], "gain": f"{o['gain_pct']:+.1f} %",
                 "reproduce": o["command"]} for o in doc["opportunities"]]  # fmt: skip
    skipped = "".join(f"<li>{escape(x['name'])}: {escape(x['reason'])}</li>"
                      for x in doc.get("not_applicable") or [])  # fmt: skip
    return (
        f'<section id="advice"><h2>Verdict</h2><p><strong>{escape(headline(doc))}</strong></p>'
        f"<h3>Rank {escape(str(doc['slowest_rank']))} (the slowest): where its step goes</h3>"
        f"{table(share_rows)}<h3>What pays (simulated, largest gain first)</h3>{table(opp_rows)}"
        + (f"<p>Not applicable here:</p><ul>{skipped}</ul>" if skipped else "")
        + "</section>"
    )
