"""Mutation testing of lumos's core, on demand (hours; never in CI): the score per package.

Usage (from the repository root, in the dev virtual environment with ``.[mutation]`` installed)::

    nice -n 15 python benchmarks/mutation.py cost            # one package
    nice -n 15 python benchmarks/mutation.py cost sim graph   # several, one after the other
    python benchmarks/mutation.py --report cost               # the score of a finished run again
    nice -n 15 python benchmarks/mutation.py --sample 150 sim # a seeded random 150 of sim's mutants
    python benchmarks/mutation.py --sample 150 --rerun sim    # the sample's survivors, current tests

``--sample N`` checks a random N of the package's mutants (``--seed``, default 0; the names are
kept in ``<workdir>/<package>/sample.json``) instead of all of them: a full package takes hours on
two cores, a sample of 150 under one. Its score is killed over the N sampled, with a 95 % Wilson
interval for the whole package's. ``--rerun`` copies the current ``tests/`` into the staging copy
and runs the sample's survivors and untested mutants again (mutmut collects the new tests' stats
first), so a test written against a survivor is scored without a fresh run.

For each package it makes a staging copy of the repository in ``--workdir`` (default
``.mutation/``; ``src/``, ``tests/``, ``benchmarks/``, ``pyproject.toml``) **without the compiled extensions of
the package's kernels** (``lumos._compiled.KERNEL_MODULES`` among its files): there those kernels
run from their ``.py`` sources, so a mutant of a kernel is what runs (with the extension beside
it, Python would import the unmutated compiled module), and the script checks, in the staging
copy, that each of them imports uncompiled. Kernels of other packages stay compiled (they are
not mutated, and as Python they would make the tests of real traces hours long). It then runs mutmut 3 there on the package's files with the package's tests
(:data:`PACKAGES`) and prints one line per package::

    cost: 412/450 killed (91.6 %), 38 survived, 0 without tests [mutmut 3.8.1]

Killed counts mutants that made a test fail or time out. The line gives killed over all mutants
mutmut made, then the score proper: killed over those not listed as equivalent in
``tests/MUTANTS.md`` (survivors not listed and mutants no test reaches count against it). Survivors are listed with
``mutmut results`` in ``<workdir>/<package>`` and shown with ``mutmut show NAME``; those that are
equivalent (no test could tell them apart) are listed with the reason in ``tests/MUTANTS.md``.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from lumos._compiled import KERNEL_MODULES  # noqa: E402

#: package -> (its source files, relative to ``src/lumos``; the tests that run against them)
PACKAGES: dict[str, tuple[list[str], list[str]]] = {
    "cost": (
        ["cost/*"],
        ["tests/cost", "tests/astra", "tests/estimate/test_dp_whatif.py",
         "tests/estimate/test_estimate.py"],
    ),
    "sim": (["sim/*"], ["tests/sim"]),
    "estimate": (["estimate/*"], ["tests/estimate", "tests/memory/test_estimate_memory.py"]),
    "graph": (
        ["graph/*"],
        ["tests/graph", "tests/memory", "tests/property", "tests/ranks", "tests/synth/test_fidelity.py"],
    ),
    "chakra": (
        ["chakra/_wire.py", "chakra/_wire_attr.py", "chakra/_encode_attrs.py", "chakra/attrs.py",
         "chakra/io.py", "chakra/io_nodes.py", "chakra/schema.py", "chakra/mapping*.py"],
        ["tests/chakra", "tests/convert"],
    ),
}  # fmt: skip
#: exit codes of a mutant's test run that mutmut records, by what they mean for the score
KILLED = {1, 3, 24, -24, 36, 37, 152, 255}
SURVIVED = {0}
NO_TESTS = {5, 33}


def stage(package: str, workdir: Path) -> Path:
    """A copy of the repository for ``package``'s run, without compiled extensions, with a
    ``[tool.mutmut]`` section naming its files and tests. Kept between runs (mutmut resumes)."""
    files, tests = PACKAGES[package]
    dest = workdir / package
    ignore = shutil.ignore_patterns("*.c", "__pycache__", "*.egg-info")
    for name in ("src", "tests", "benchmarks"):
        shutil.copytree(ROOT / name, dest / name, ignore=ignore, dirs_exist_ok=True)
    mutated = [m for m in KERNEL_MODULES if _selected(m, files)]
    for module in mutated:  # the package's own kernels run from their (mutated) sources
        folder = dest / "src" / Path(*module.split(".")[:-1])
        for ext in folder.glob(module.rsplit(".", 1)[-1] + ".*"):
            if ext.suffix in (".so", ".pyd"):
                ext.unlink()
    only = ", ".join(json.dumps(f"src/lumos/{f}") for f in files)
    selection = ", ".join(json.dumps(t) for t in tests)
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    text += (
        "\n[tool.mutmut]\n"
        'source_paths = ["src/"]\n'
        'also_copy = ["benchmarks/"]\n'
        f"only_mutate = [{only}]\n"
        f"pytest_add_cli_args_test_selection = [{selection}]\n"
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-m", "not slow"]\n'
        "use_git_change_detection = false\n"
    )
    (dest / "pyproject.toml").write_text(text, encoding="utf-8")
    check = (
        "import importlib, json, sys; from lumos._compiled import is_compiled; "
        "print(json.dumps({m: is_compiled(importlib.import_module(m)) for m in sys.argv[1:]}))"
    )
    out = subprocess.run([sys.executable, "-c", check, *mutated], cwd=dest / "src",
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert not any(json.loads(out).values()), f"kernels still compiled in the staging copy: {out}"
    print(f"{package}: kernels run from their sources: {', '.join(mutated) or 'none'}")
    return dest


def _selected(module: str, files: list[str]) -> bool:
    """Whether kernel ``module`` is among the package's files (``fnmatch`` patterns)."""
    rel = "/".join(module.split(".")[1:]) + ".py"
    return any(fnmatch.fnmatch(rel, f) for f in files)


def exit_codes(dest: Path) -> dict[str, int | None]:
    """Every mutant of a staging copy by name: its recorded exit code (None: not checked)."""
    codes: dict[str, int | None] = {}
    for meta in (dest / "mutants").rglob("*.meta"):
        codes.update(json.loads(meta.read_text())["exit_code_by_key"])
    return codes


def draw_sample(dest: Path, mutmut: Path, env: dict[str, str], n: int, seed: int) -> list[str]:
    """``n`` mutant names drawn at random (``seed``) from all of the package's mutants, kept in
    ``sample.json`` (a later call with the same ``n`` and ``seed`` reuses them)."""
    path = dest / "sample.json"
    if path.exists():
        kept = json.loads(path.read_text())
        if kept["n"] == n and kept["seed"] == seed:
            return list(kept["names"])
    if not (dest / "mutants" / "mutmut-stats.json").exists():
        # mutmut has no "generate only": a run filtered to a name that matches nothing makes the
        # mutants and their test stats, then stops at its filter
        probe = [str(mutmut), "run", "lumos.no_such_module_for_sampling"]
        out = subprocess.run(probe, cwd=dest, env=env, check=False, capture_output=True, text=True)
        if "nothing matches" not in out.stdout + out.stderr:
            raise SystemExit(f"{dest}: mutmut failed before its mutants were made:\n"
                             f"{(out.stdout + out.stderr)[-3000:]}")  # fmt: skip
    names = sorted(exit_codes(dest))
    if not names:
        raise SystemExit(f"{dest}: mutmut made no mutants (see `mutmut run` there)")
    chosen = sorted(random.Random(seed).sample(names, min(n, len(names))))
    path.write_text(json.dumps({"n": n, "seed": seed, "names": chosen}, indent=1))
    return chosen


def score(dest: Path, names: list[str] | None = None) -> dict[str, int]:
    """Counts of killed / survived / no tests / other over every mutant of a run (its
    ``mutants/**/*.meta`` files), or over ``names`` only (a sample)."""
    counts = {"total": 0, "killed": 0, "survived": 0, "no_tests": 0, "not_checked": 0,
              "equivalent": 0}  # fmt: skip
    codes = exit_codes(dest)
    if names is not None:
        codes = {k: codes.get(k) for k in names}
    equivalent = listed_equivalent()
    for name, code in codes.items():
        counts["total"] += 1
        if code in KILLED:
            counts["killed"] += 1
        elif code in SURVIVED:
            counts["survived"] += 1
            counts["equivalent"] += name in equivalent
        elif code in NO_TESTS:
            counts["no_tests"] += 1
        else:
            counts["not_checked"] += 1
    return counts


def listed_equivalent(path: Path = ROOT / "tests" / "MUTANTS.md") -> set[str]:
    """The mutants named in the first column of the "Equivalent mutants" table of
    ``tests/MUTANTS.md`` (full names: a name there stands for that function's mutant of that
    number as the file's commit made it). Names in the reasons column are references, not
    listings."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    section = text.split("## Equivalent mutants", 1)[-1].split("\n## ", 1)[0] if text else ""
    first_cells = [
        line.split(" | ", 1)[0] for line in section.splitlines() if line.startswith("| `")
    ]
    return set(re.findall(r"lumos\.[\w.]+?__mutmut_\d+", "\n".join(first_cells)))


def wilson(killed: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95 % Wilson score interval of a proportion ``killed / n``, in percent."""
    if n == 0:
        return 0.0, 100.0
    p = killed / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return 100.0 * (centre - half), 100.0 * (centre + half)


def line(package: str, c: dict[str, int], sampled: bool = False) -> str:
    """One package's score: killed over all mutants, then killed over the mutants that were run
    and are not listed as equivalent (the mutation score proper), with its 95 % interval for a
    sample."""
    pct = 100.0 * c["killed"] / c["total"] if c["total"] else 0.0
    extra = f", {c['not_checked']} not checked" if c["not_checked"] else ""
    live = c["total"] - c["equivalent"] - c["not_checked"]  # mutants not run have no verdict
    score = f"; score {c['killed']}/{live} ({100.0 * c['killed'] / live:.1f} %)" if live else ""
    interval = ""
    if sampled:
        lo, hi = wilson(c["killed"], live)
        interval = f" [sample; package 95 % interval {lo:.1f} .. {hi:.1f} %]"
    return (
        f"{package}: {c['killed']}/{c['total']} killed ({pct:.1f} %), {c['survived']} survived "
        f"({c['equivalent']} listed equivalent), {c['no_tests']} without tests{extra}{score}"
        f"{interval}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("packages", nargs="+", choices=sorted(PACKAGES))
    ap.add_argument("--workdir", type=Path, default=ROOT / ".mutation")
    ap.add_argument("--max-children", type=int, default=2, help="parallel mutant runs (2)")
    ap.add_argument("--report", action="store_true", help="print the scores of finished runs")
    ap.add_argument("--sample", type=int, help="check a seeded random N of each package's mutants")
    ap.add_argument("--seed", type=int, default=0, help="the sample's seed (0)")
    ap.add_argument(
        "--rerun", action="store_true", help="with --sample: run its survivors on the current tests"
    )
    args = ap.parse_args(argv)
    env = dict(os.environ)
    # the staging copy is not beside ../shared: point the tests at the same realdata folder
    sys.path.insert(0, str(ROOT))
    from tests.realdata import realdata_root

    root = realdata_root()
    if root is not None:
        env["LUMOS_REALDATA"] = str(root)
    mutmut = Path(sys.executable).with_name("mutmut")
    lines = []
    for package in args.packages:
        dest = args.workdir / package
        names: list[str] | None = None
        if not args.report:
            dest = stage(package, args.workdir)
        if args.sample:
            names = draw_sample(dest, mutmut, env, args.sample, args.seed)
        if not args.report:
            cmd = [str(mutmut), "run", "--max-children", str(args.max_children)]
            if names is not None:
                codes = exit_codes(dest)
                todo = [k for k in names if codes.get(k) is None]
                if args.rerun:
                    todo += [k for k in names if codes.get(k) in SURVIVED | NO_TESTS]
                cmd += todo
            if names is None or len(cmd) > 4:
                subprocess.run(cmd, cwd=dest, env=env, check=False)
        lines.append(line(package, score(dest, names), sampled=names is not None))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
