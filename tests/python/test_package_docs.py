"""The package's own documentation, as a pip user gets it: every KafkaShareOptions field documented (its option
name and default as the connector declares them), and every link to the project's pages absolute and pointing at a
file (and heading) that exists, since the wheel carries no docs/ folder. CHANGELOG.md too: PyPI links to it."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from harness import ROOT
from spark_kafka_share import KafkaShareOptions
from spark_kafka_share import options as options_module

REPO_URL = "https://github.com/kafkashare/spark-kafka-share"
PACKAGE = ROOT / "python" / "src" / "spark_kafka_share"
PAGES = [ROOT / "CHANGELOG.md", ROOT / "python" / "README.md", *sorted(PACKAGE.glob("*.py"))]
# Defaults that name no value a user would look for in the text.
UNNAMED_DEFAULTS = {"", "(required)", "(none)", "(the group's)"}


def _attributes() -> dict[str, str]:
    """The Attributes section of KafkaShareOptions' docstring: field name to its (joined) entry."""
    doc = KafkaShareOptions.__doc__ or ""
    assert "\n    Attributes:\n" in doc, "KafkaShareOptions' docstring has no Attributes section"
    section = doc.split("\n    Attributes:\n", 1)[1]
    entries: dict[str, str] = {}
    current = None
    for line in section.splitlines():
        entry = re.match(r"^ {8}(\w+): (.*)$", line)
        if entry:
            current = entry.group(1)
            entries[current] = entry.group(2)
        elif current and line.startswith(" " * 12):
            entries[current] += " " + line.strip()
        elif line.strip():
            current = None
    return entries


def test_every_field_is_documented_with_its_option_name_and_default() -> None:
    documented = _attributes()
    fields = [f.name for f in dataclasses.fields(KafkaShareOptions)]
    assert list(documented) == fields, f"documented {list(documented)}, fields {fields} (same names, same order)"
    for spec in options_module.SPEC:
        text = documented[spec["python"]]
        if spec["python"] != "kafka":
            assert text.startswith(f"[{spec['key']}] "), f"{spec['python']}: its entry must start with [{spec['key']}]"
        default = spec["default"]
        if spec["kind"] == "boolean":
            said = f"{default.capitalize()} (the default)" in text or f"Default: {default}." in text
            assert said, f"{spec['python']}: the entry does not say the default, {default}"
        elif default not in UNNAMED_DEFAULTS:
            assert default in text, f"{spec['python']}: the entry does not say the default, {default}"
        for value in spec.get("values", []):
            assert f"'{value}'" in text, f"{spec['python']}: the entry does not name the choice '{value}'"
        if spec["kind"] == "whole" and spec["max"] < 2**63 - 1:
            assert f"{spec['min']} to {spec['max']}" in text, f"{spec['python']}: the entry does not give its bounds"


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors (as tests/python/test_docs.py computes them)."""
    headings = re.findall(r"^#+\s+(.*)$", page.read_text(), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-") for h in headings}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_are_absolute_and_resolve_in_this_repository(page: Path) -> None:
    text = page.read_text()
    broken = []
    for path, anchor in re.findall(re.escape(REPO_URL) + r"/(?:blob|tree)/main/([\w./-]+?)(?:#([\w-]+))?(?=[\s)>\"'`]|$)", text):
        file = ROOT / path
        if not file.exists():
            broken.append(f"{path}: no such file in the repository")
        elif anchor and anchor not in _anchors(file):
            broken.append(f"{path}#{anchor}: no such heading")
    # A docs/ path that is not part of a URL means nothing to a pip user.
    bare = [m for m in re.findall(r"(?<![\w/])(docs/[\w./-]+\.md)", text)]
    broken += [f"{b}: a path in the repository, not a link a pip user can open" for b in bare]
    relative = [t for t in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"^(https?:|mailto:)", t)]
    broken += [f"{r}: a relative link (PyPI and help() have no repository beside them)" for r in relative]
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)
