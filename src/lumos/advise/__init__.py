"""``lumos advise``: what bounds the step, and which change pays (see :mod:`lumos.advise.run`)."""

from lumos.advise.opportunities import Opportunity, opportunities
from lumos.advise.run import (
    Advice,
    advice_markdown,
    advise,
    headline,
    replay_headline,
    write_advice,
)
from lumos.advise.verdict import CAUSES, Verdict, verdict

__all__ = [
    "CAUSES",
    "Advice",
    "Opportunity",
    "Verdict",
    "advice_markdown",
    "advise",
    "headline",
    "opportunities",
    "replay_headline",
    "verdict",
    "write_advice",
]
