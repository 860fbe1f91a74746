"""``benchmarks/mutation.py``'s reading of ``tests/MUTANTS.md`` and its interval: what the score
leaves out must be exactly the listed equivalents, and the interval must be Wilson's."""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmarks.mutation import listed_equivalent, wilson

_TEXT = """# Surviving mutants

## Scores

`lumos.cost.units.x_parse_size__mutmut_1` is named here, outside the table.

## Equivalent mutants

| mutant | why no test can tell |
|---|---|
| `lumos.cost.a.x_f__mutmut_3`, `lumos.cost.a.x_f__mutmut_4` (dtype dropped) | as `lumos.cost.b.x_g__mutmut_9`, which is not listed |
| `lumos.sim.c.xǁRunǁ__init____mutmut_12` | the default is never read |

## Elsewhere

| `lumos.graph.d.x_h__mutmut_5` | a later section's table |
"""


def test_only_the_first_column_of_the_equivalents_table_is_listed(tmp_path: Path) -> None:
    """Names in the reasons column (`x_g_9`), before the section (`parse_size_1`) or after it
    (`x_h_5`) are references, not listings: the set is the three first-column names."""
    p = tmp_path / "MUTANTS.md"
    p.write_text(_TEXT, encoding="utf-8")
    assert listed_equivalent(p) == {
        "lumos.cost.a.x_f__mutmut_3",
        "lumos.cost.a.x_f__mutmut_4",
        "lumos.sim.c.xǁRunǁ__init____mutmut_12",
    }


def test_a_missing_listing_lists_nothing(tmp_path: Path) -> None:
    assert listed_equivalent(tmp_path / "absent.md") == set()


def test_wilson_interval_of_103_of_117() -> None:
    """p = 0.880342, z = 1.96, z²/n = 0.032834: centre (p + z²/2n) / (1 + z²/n) = 0.868254,
    half-width z·sqrt(p(1-p)/n + z²/4n²) / (1 + z²/n) = 1.96 x 0.031153 / 1.032834 = 0.059119,
    so 80.91 .. 92.74 % (the normal-approximation interval would be 82.1 .. 93.9 %)."""
    lo, hi = wilson(103, 117)
    assert lo == pytest.approx(80.914, abs=0.01)
    assert hi == pytest.approx(92.737, abs=0.01)


def test_wilson_of_nothing_is_the_whole_range() -> None:
    assert wilson(0, 0) == (0.0, 100.0)
