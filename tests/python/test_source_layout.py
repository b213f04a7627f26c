"""The connector's packages depend one way (docs/internals/architecture.md): no two of them import each other."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

SCALA = Path(__file__).resolve().parents[2] / "jvm" / "src" / "main" / "scala" / "io" / "github" / "kafkashare" / "spark"
NESTED = {"offsets.store"}  # a package inside another that counts as its own


def _package_of(name: str) -> str:
    parts = name.split(".")
    two = ".".join(parts[:2])
    return two if two in NESTED else parts[0]


def _dependencies() -> dict[str, dict[str, set[str]]]:
    """Package -> the packages its code names (comments left out) -> the files that do."""
    deps: dict[str, dict[str, set[str]]] = {}
    for file in SCALA.rglob("*.scala"):
        package = ".".join(file.parent.relative_to(SCALA).parts) or "(root)"
        code = re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", "", file.read_text(), flags=re.S))
        for name in re.findall(r"io\.github\.kafkashare\.spark\.([a-z][\w.]*)", code):
            target = _package_of(name)
            if target != package and not package.startswith(target + "."):
                deps.setdefault(package, {}).setdefault(target, set()).add(file.name)
    return deps


def test_no_two_packages_import_each_other() -> None:
    deps = _dependencies()
    assert {"reader", "runtime", "consumer", "ack"} <= set(deps), f"the sources were not found under {SCALA}"
    cycles = [
        f"{a} <-> {b} ({sorted(deps[a][b])} / {sorted(deps[b][a])})"
        for a, b in itertools.combinations(sorted(deps), 2)
        if b in deps[a] and a in deps.get(b, {})
    ]
    assert not cycles, cycles
