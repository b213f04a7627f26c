"""The connector's packages depend one way (docs/internals/architecture.md): no package reaches, through the
packages it imports, back to itself. The root package (the providers, the plugin) may import any other; none
imports it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "jvm"
SOURCES = [ROOT / "src" / "main" / "scala", ROOT / "realtime" / "src" / "main" / "scala"]
PREFIX = Path("io") / "github" / "kafkashare" / "spark"
NESTED = {"offsets.store"}  # a package inside another that counts as its own


def _package_of(name: str) -> str:
    """The package a name after `io.github.kafkashare.spark.` is in: `(root)` for a class of the root package."""
    parts = name.split(".")
    if parts[0][:1].isupper():
        return "(root)"
    two = ".".join(parts[:2])
    return two if two in NESTED else parts[0]


def _dependencies() -> dict[str, dict[str, set[str]]]:
    """Package -> the packages its code names (comments left out) -> the files that do."""
    deps: dict[str, dict[str, set[str]]] = {}
    for source in SOURCES:
        base = source / PREFIX
        for file in base.rglob("*.scala"):
            package = ".".join(file.parent.relative_to(base).parts) or "(root)"
            package = package if package in NESTED else package.split(".")[0]
            # A class named in a string is loaded by reflection where it exists (planning's StreamStart loads
            # the real-time stream, built apart): no import, and what it names may import its loader.
            code = re.sub(r'"(?:[^"\\\n]|\\.)*"', '""', file.read_text())
            code = re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", "", code, flags=re.S))
            for name in re.findall(r"io\.github\.kafkashare\.spark\.([A-Za-z][\w.]*)", code):
                target = _package_of(name)
                if target != package:
                    deps.setdefault(package, {}).setdefault(target, set()).add(file.name)
    return deps


def _cycle(deps: dict[str, dict[str, set[str]]]) -> list[str]:
    """A cycle of packages, each importing the next, or [] where there is none."""
    state: dict[str, str] = {}

    def visit(package: str, path: list[str]) -> list[str]:
        state[package] = "open"
        for target in sorted(deps.get(package, {})):
            if state.get(target) == "open":
                return path[path.index(target) :] + [target]
            if target not in state:
                found = visit(target, path + [target])
                if found:
                    return found
        state[package] = "done"
        return []

    for package in sorted(deps):
        if package not in state:
            found = visit(package, [package])
            if found:
                return found
    return []


def test_no_package_imports_itself_back() -> None:
    deps = _dependencies()
    assert {"reader", "runtime", "consumer", "ack", "realtime", "(root)"} <= set(deps), f"the sources were not found under {ROOT}"
    cycle = _cycle(deps)
    named = [f"{a} -> {b} ({sorted(deps[a][b])})" for a, b in zip(cycle, cycle[1:])]
    assert not cycle, " ; ".join(named)


def test_the_cycle_check_finds_a_cycle() -> None:
    assert _cycle({"a": {"b": {"A.scala"}}, "b": {"c": {"B.scala"}}, "c": {"a": {"C.scala"}}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b": {"A.scala"}}, "b": {}}) == []


# What only the `sparkinternals` package may name: Spark's classes outside its public API (Catalyst's but the
# InternalRow a data source hands Spark, the execution and unsafe packages), Spark's classes and threads by name,
# the local properties Spark sets on a query's thread, its internal SQL settings, the master string, and the
# checkpoint's layout.
SPARK_INTERNALS = {
    "a Catalyst class other than InternalRow": r"org\.apache\.spark\.sql\.catalyst\.(?!InternalRow\b)[\w{]",
    "Spark's execution package": r"org\.apache\.spark\.sql\.execution\b",
    "Spark's unsafe package": r"org\.apache\.spark\.unsafe\b",
    "a Spark class by name": r'"org\.apache\.spark\.|"[A-Z]\w+(?:Sink|Trigger)"',
    "Spark's thread by name": r'"stream execution thread',
    "a local property of Spark's": r"getLocalProperty|\"streaming\.sql\.batchId\"|\"sql\.streaming\.queryId\"",
    "an internal SQL setting of Spark's": r'"spark\.sql\.streaming\.(?!checkpointFileManagerClass\b)',
    "the master string": r"\.master\b",
    "the checkpoint's layout": r'"(?:sources|offsets|commits)"',
}


def _spark_internals_named(text: str) -> list[str]:
    # Comments out, strings kept (some patterns are of strings): a `//` inside a string is no comment.
    code = re.sub(r'("(?:[^"\\\n]|\\.)*")|//[^\n]*', lambda m: m.group(1) or "", re.sub(r"/\*.*?\*/", "", text, flags=re.S))
    return [what for what, pattern in SPARK_INTERNALS.items() if re.search(pattern, code)]


def test_only_the_sparkinternals_package_names_sparks_internals() -> None:
    named = {}
    for source in SOURCES:
        for file in (source / PREFIX).rglob("*.scala"):
            if "sparkinternals" not in file.parts:
                found = _spark_internals_named(file.read_text())
                if found:
                    named[str(file.relative_to(ROOT))] = found
    assert not named, f"move these behind io.github.kafkashare.spark.sparkinternals: {named}"


def test_the_spark_internals_rule_finds_each_kind() -> None:
    assert _spark_internals_named("import org.apache.spark.sql.catalyst.InternalRow\nimport org.apache.spark.sql.types._") == []
    assert _spark_internals_named("import org.apache.spark.sql.catalyst.expressions.GenericInternalRow") == [
        "a Catalyst class other than InternalRow"
    ]
    assert _spark_internals_named('sc.getLocalProperty("streaming.sql.batchId")') == ["a local property of Spark's"]
    assert _spark_internals_named('new Path(root, "commits")') == ["the checkpoint's layout"]
    assert _spark_internals_named('Class.forName("org.apache.spark.sql.connector.X")') == ["a Spark class by name"]
    assert _spark_internals_named("sc.master match {") == ["the master string"]
    assert _spark_internals_named("import org.apache.spark.sql.catalyst.{InternalRow, expressions}") == [
        "a Catalyst class other than InternalRow"
    ]
    in_a_string = 'val u = "http://x"; import org.apache.spark.unsafe.types.UTF8String'
    assert _spark_internals_named(in_a_string) == ["Spark's unsafe package"]
    assert _spark_internals_named('sink == "ForeachBatchSink"') == ["a Spark class by name"]
    assert _spark_internals_named('t.getName.startsWith("stream execution thread")') == ["Spark's thread by name"]
    assert _spark_internals_named('conf.get("spark.sql.streaming.minBatchesToRetain")') == ["an internal SQL setting of Spark's"]
    assert _spark_internals_named("// sc.master, in a comment\n/* getLocalProperty */") == []


def test_the_sparkinternals_package_imports_no_other() -> None:
    deps = _dependencies()
    assert "sparkinternals" not in deps, f"sparkinternals imports {sorted(deps.get('sparkinternals', {}))}"
