"""The docs lint: links resolve, and the docs name only what the code has.

Pure Python, no Spark and no broker. Every relative link in README.md, CONTRIBUTING.md and docs/ points to a file
(and heading) that exists; and every option (`kafka.share.*`, the Python `KafkaShareOptions` fields), metric, error
condition, make target and default the docs name is one the code has, and every error message they quote is one
the code gives. The sources of truth: OptionDeclarations.scala (with the options_spec.json it generates),
ShareSourceMetrics.scala and the progress metrics of the micro-batch stream, the error catalogue
(kafka-share-error-conditions.json) and the errors the Python package raises, the Makefile, python/src.
"""

from __future__ import annotations

import ast
import functools
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import ROOT

PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
# The pages a user reads: the README and the user's guide (the reference is generated or checked by Scala suites).
USER_PAGES = [ROOT / "README.md", *sorted((ROOT / "docs" / "guide").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
SCALA = ROOT / "jvm" / "src" / "main" / "scala" / "io" / "github" / "kafkashare" / "spark"
PACKAGE = ROOT / "python" / "src" / "spark_kafka_share"


def _id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to dashes."""
    headings = re.findall(r"^#+\s+(.*)$", page.read_text(), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-") for h in headings}


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"^[a-z]+:", target):  # http:, https:, mailto: are not checked (no network)
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            broken.append(f"{target}: no heading '{anchor}' in {file.name}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


# ---------------------------------------------------------------------------------------------------------------
# What the code has


@functools.cache
def _spec() -> list[dict[str, str]]:
    """The declared options, as OptionsDoc renders them for Python (OptionsDocSuite keeps it equal to the Scala)."""
    options: list[dict[str, str]] = json.loads((PACKAGE / "options_spec.json").read_text())["options"]
    return options


@functools.cache
def _option_keys() -> frozenset[str]:
    """Option keys declared in OptionDeclarations.scala, and the refused names its maps list (the docs name those)."""
    text = (SCALA / "options" / "OptionDeclarations.scala").read_text()
    declared = set(re.findall(r'^\s*val [A-Z]\w*\s*=\s*"([^"]+)"', text, flags=re.M))
    refused = {f"kafka.{k}" for k in _map_keys(text, "RefusedKafkaOptions")}
    return frozenset(declared | refused | {o["key"] for o in _spec()})


@functools.cache
def _built_in_kafka_options() -> frozenset[str]:
    return frozenset(_map_keys((SCALA / "options" / "OptionDeclarations.scala").read_text(), "BuiltInKafkaSourceOptions"))


def _map_keys(text: str, name: str) -> list[str]:
    body = text[text.index(f"val {name}") :]
    body = body[: body.index("\n  )")]
    return re.findall(r'^\s*"([^"]+)"\s*->', body, flags=re.M)


@functools.cache
def _python_fields() -> frozenset[str]:
    """The fields of KafkaShareOptions (python/src/spark_kafka_share/options.py)."""
    tree = ast.parse((PACKAGE / "options.py").read_text())
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "KafkaShareOptions")
    return frozenset(n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name))


@functools.cache
def _python_names() -> frozenset[str]:
    """Every name the package defines: functions, classes, their parameters and fields."""
    names: set[str] = set()
    for file in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names.add(node.name)
            if isinstance(node, ast.FunctionDef):
                names.update(a.arg for a in node.args.args + node.args.kwonlyargs)
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
    return frozenset(names)


@functools.cache
def _python_defaults() -> dict[str, str]:
    """The package's functions and their first parameter's default, as a string: {"real_time": "5 seconds"}."""
    defaults: dict[str, str] = {}
    for file in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, ast.FunctionDef) and node.args.defaults and isinstance(node.args.defaults[0], ast.Constant):
                defaults[node.name] = str(node.args.defaults[0].value)
    return defaults


@functools.cache
def _metrics() -> frozenset[str]:
    """The source's metrics: ShareSourceMetrics.scala's declarations (their `<name>Total` query totals for the
    summed task metrics), and the progress metrics the micro-batch stream and the backlog report."""
    text = (SCALA / "metrics" / "ShareSourceMetrics.scala").read_text()
    summed = re.findall(r'\bsum\(\s*"(\w+)"', text)
    largest = re.findall(r'\bmax\(\s*"(\w+)"', text)
    # Progress figures of the driver's own (the time lag: `val BacklogAgeMs = "backlogAgeMs"`).
    named = re.findall(r'\bval\s+\w+\s*=\s*"([a-z]\w*)"', text)
    progress: list[str] = []
    for file in ("KafkaShareMicroBatchStream.scala", "BacklogHistory.scala"):
        progress += re.findall(r'^\s*"(\w+)"\s*->', (SCALA / "planning" / file).read_text(), flags=re.M)
    return frozenset(summed + [f"{m}Total" for m in summed] + largest + named + progress)


@functools.cache
def _catalogue() -> dict[str, list[str]]:
    """Every condition with its message template, split into literal text and placeholders (None)."""
    raw = json.loads((ROOT / "jvm" / "src" / "main" / "resources" / "error" / "kafka-share-error-conditions.json").read_text())
    conditions: dict[str, list[str]] = {}
    for main, body in raw.items():
        main_message = " ".join(body.get("message", []))
        conditions[main] = [main_message]
        for sub, sub_body in body.get("subClass", {}).items():
            conditions[f"{main}.{sub}"] = [main_message, " ".join(sub_body["message"])]
    return conditions


@functools.cache
def _python_errors() -> dict[str, list[str | None]]:
    """The conditions the Python package raises, with the message template of each (placeholders as None)."""
    errors: dict[str, list[str | None]] = {}
    for file in PACKAGE.glob("*.py"):
        tree = ast.parse(file.read_text())
        conditions = {}
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            for stmt in cls.body:
                if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                    if any(isinstance(t, ast.Name) and t.id == "condition" for t in stmt.targets):
                        conditions[cls.name] = stmt.value.value
        for node in ast.walk(tree):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and isinstance(node.exc.func, ast.Name):
                condition = conditions.get(node.exc.func.id)
                if condition and node.exc.args and isinstance(node.exc.args[0], ast.JoinedStr):
                    parts: list[str | None] = []
                    for value in node.exc.args[0].values:
                        parts.append(value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) else None)
                    errors[condition] = parts
    return errors


def _conditions() -> frozenset[str]:
    return frozenset(_catalogue()) | frozenset(_python_errors())


@functools.cache
def _make_targets() -> frozenset[str]:
    text = (ROOT / "Makefile").read_text()
    phony = re.search(r"^\.PHONY:(.*)$", text, flags=re.M)
    targets = set(phony.group(1).split()) if phony else set()
    for rule in re.findall(r"^([^\s#:=][^:=]*?):(?!=)", text, flags=re.M):
        for target in rule.split():
            targets.add(target.replace("$(VENV_OLDEST)", ".venv-spark-oldest").replace("$(VENV)", ".venv"))
    return frozenset(targets)


@functools.cache
def _code_words() -> frozenset[str]:
    """Identifiers that occur anywhere in the code and tests (for the camelCase names the docs use)."""
    words: set[str] = set()
    for folder in ("jvm", "python", "tests"):
        for file in (ROOT / folder).rglob("*"):
            if file.suffix in {".scala", ".py", ".java"} and "target" not in file.parts:
                words.update(re.findall(r"[A-Za-z_]\w+", file.read_text(errors="replace")))
    return frozenset(words)


# Names of Spark's and Kafka's APIs that the user's pages name and the code does not spell out.
SPARK_NAMES = frozenset(
    {"isTriggerActive", "numInputRows", "awaitTermination", "lastProgress", "dropDuplicates", "transformWithState"}
)


# ---------------------------------------------------------------------------------------------------------------
# What the docs name


def _code_spans(text: str) -> Iterator[str]:
    """Inline code spans and the lines of fenced blocks."""
    in_block = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            in_block = not in_block
            continue
        if in_block:
            yield line.strip()
        else:
            yield from re.findall(r"`([^`]+)`", line)


def _python_blocks(text: str) -> Iterator[str]:
    yield from re.findall(r"```python\n(.*?)```", text, flags=re.S)


def _call_arguments(code: str, function: str) -> Iterator[list[str]]:
    """The keyword names of each call of `function` in `code`, without parsing (examples may elide code)."""
    for match in re.finditer(rf"\b{function}\(", code):
        depth, i, top, quote = 1, match.end(), [], ""
        while i < len(code) and depth:
            c = code[i]
            if quote:
                quote = "" if c == quote else quote
            elif c in "'\"":
                quote = c
            elif c in "([{":
                depth += 1
            elif c in ")]}":
                depth -= 1
            elif depth == 1:
                top.append(c)
            i += 1
        yield re.findall(r"(?:^|,)\s*(\w+)\s*=(?!=)", "".join(top))


def _matches_prefix(quote: str, template: list[str | None]) -> bool:
    """Whether `quote` reads as the start of a message of `template`: its literal text in order, example values
    where the template has placeholders (None), and '...' where the quote leaves text out."""
    doc: list[str | None] = []
    for i, part in enumerate(re.split(r"\.\.\.|…", quote)):
        if i:
            doc.append(None)  # the quote's ellipsis
        doc.extend(part)
    tokens: list[str | None] = []
    for part in template:
        tokens.extend([None] if part is None else list(part))

    @functools.cache
    def match(i: int, j: int) -> bool:
        if i == len(doc):
            return True
        if doc[i] is None:  # an ellipsis skips template text
            return match(i + 1, j) or (j < len(tokens) and match(i, j + 1))
        if j == len(tokens):
            return False
        if tokens[j] is None:  # a placeholder takes the quote's example value
            return match(i + 1, j) or match(i, j + 1) or match(i + 1, j + 1)
        return doc[i] == tokens[j] and match(i + 1, j + 1)

    return match(0, 0)


def _template(condition: str) -> list[str | None]:
    if condition in _python_errors():
        parts = _python_errors()[condition]
        # "[{X.condition}] ..." names the condition through a placeholder
        named: list[str | None] = [f"[{condition}"]
        return named + parts[2:] if parts[:2] == ["[", None] else parts
    main_message, *sub = _catalogue()[condition]
    text = f"[{condition}] " + " ".join([main_message, *sub]).strip()
    return [None if p.startswith("<") else p for p in re.split(r"(<[A-Za-z]+>)", text) if p]


# ---------------------------------------------------------------------------------------------------------------
# The checks


# The help of KAFKA_SHARE_INVALID_OPTION.UNKNOWN shows what a misspelt option would do.
MISSPELT_ON_PURPOSE = frozenset({"kafka.share.exactly_once.strategy"})


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_every_source_option_named_exists(page: Path) -> None:
    named = set(re.findall(r"\bkafka\.share\.[A-Za-z][\w.]*[A-Za-z]", page.read_text()))
    unknown = sorted(named - _option_keys() - MISSPELT_ON_PURPOSE)
    assert not unknown, f"{_id(page)} names options OptionDeclarations.scala does not declare: {unknown}"


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_every_python_option_field_named_exists(page: Path) -> None:
    text = page.read_text()
    named = {name for block in _python_blocks(text) for call in _call_arguments(block, "KafkaShareOptions") for name in call}
    # `starting_offsets="earliest"` in prose
    named |= {m for span in _code_spans(text) for m in re.findall(r"^([a-z]+(?:_[a-z]+)+)=", span)}
    unknown = sorted(named - _python_fields() - _python_names())
    assert not unknown, f"{_id(page)} names KafkaShareOptions fields the package does not have: {unknown}"


METRIC_SHAPED = re.compile(
    r"^(records[A-Z]\w*|\w+Total|lastBatch\w*|backlog\w*|redeliveries\w*|consumersCreated\w*|lockUsed\w*"
    r"|pinnedRanges\w*|lockDuration\w*|deliveryCountLimit\w*|maxDeliveryCount\w*)$"
)


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_every_metric_named_exists(page: Path) -> None:
    named = {span for span in _code_spans(page.read_text()) if METRIC_SHAPED.match(span)}
    named |= set(re.findall(r'\["(\w+)"\]', page.read_text())) & {n for n in _code_words() if METRIC_SHAPED.match(n)}
    # backlog_drain_ms is an option's field, not a metric
    unknown = sorted(n for n in named if n not in _metrics() and n not in _python_fields() and not re.search(r"\W", n))
    assert not unknown, f"{_id(page)} names metrics the source does not report: {unknown}"


@pytest.mark.parametrize("page", USER_PAGES, ids=_id)
def test_every_camel_case_name_is_one_the_code_has(page: Path) -> None:
    """A user's page that names `someName` (an option, a metric, a column, an API) names one that exists."""
    spans = [s.split("=")[0] for s in _code_spans(page.read_text())]  # `includeHeaders=true` names includeHeaders
    named = {s for s in spans if re.fullmatch(r"[a-z]+[A-Z]\w*", s)}
    known = _option_keys() | _built_in_kafka_options() | _metrics() | _code_words() | SPARK_NAMES
    unknown = sorted(named - known)
    assert not unknown, f"{_id(page)} names what neither the code nor Spark has: {unknown}"


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_every_error_condition_named_exists(page: Path) -> None:
    named = set(re.findall(r"\bKAFKA_SHARE_[A-Z_]*[A-Z](?:\.[A-Z_]*[A-Z])?", page.read_text()))
    unknown = sorted(named - _conditions())
    assert not unknown, f"{_id(page)} names error conditions neither the catalogue nor the Python package has: {unknown}"


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_every_quoted_error_message_is_one_the_code_gives(page: Path) -> None:
    wrong = []
    for span in _code_spans(page.read_text()):
        quoted = re.match(r"^\[(KAFKA_SHARE_[A-Z_.]+)\] ", span)
        if quoted and quoted.group(1) in _conditions() and not _matches_prefix(span, _template(quoted.group(1))):
            wrong.append(span)
    assert not wrong, f"{_id(page)} quotes messages the code does not give: {wrong}"


@functools.cache
def _unprefixed_messages() -> list[tuple[str, list[str | None]]]:
    """Each catalogue message of a sub-condition without its condition and common start, for bare quotes."""
    messages = []
    for condition, (_, *sub) in _catalogue().items():
        if sub:
            messages.append((condition, [None if p.startswith("<") else p for p in re.split(r"(<[A-Za-z]+>)", sub[0]) if p]))
    return messages


@pytest.mark.parametrize("page", USER_PAGES, ids=_id)
def test_an_error_message_is_quoted_with_its_condition(page: Path) -> None:
    """Errors start with their condition: a quote of a message without it shows the user text they will not see."""
    bare = []
    for span in _code_spans(page.read_text()):
        if span.startswith("[") or len(span.split()) < 4:
            continue
        for condition, template in _unprefixed_messages():
            lead = template[0]
            if isinstance(lead, str) and len(lead) >= 8 and span[:8] == lead[:8] and _matches_prefix(span, template):
                bare.append(f"{span} (the message starts with [{condition}])")
    assert not bare, f"{_id(page)} quotes error messages without their condition: {bare}"


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_every_make_target_named_exists(page: Path) -> None:
    text = page.read_text()
    unknown = []
    for span in _code_spans(text):
        for command in re.findall(r"(?:^|&&\s*|;\s*)make\s+([^\s#;&|`]+(?:\s+[A-Z_]+=\"[^\"]*\")*)", span):
            target, *variables = command.split()
            target = target.removeprefix("timed-")
            if target not in _make_targets():
                unknown.append(target)
            for variable in re.findall(r"([A-Z_]+)=", " ".join(variables)):
                if f"$({variable})" not in (ROOT / "Makefile").read_text():
                    unknown.append(f"{target} {variable}=")
    assert not unknown, f"{_id(page)} names make targets or variables the Makefile does not have: {unknown}"


def _declared_default(name: str) -> str | None:
    for option in _spec():
        if name in (option["key"], option["python"]):
            return option["default"]
    return None


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_every_default_stated_is_the_codes(page: Path) -> None:
    """`option` (default `v`), `option` defaults to `v`, `option.ms` (2 s), `function()` ... default `v`; and the
    values of choice options: `option=v`, .option("option", "v"), field="v"."""
    text = re.sub(r"\s+", " ", page.read_text())
    wrong = []
    for name, value in re.findall(r"`([\w.]+)`[^`.|]{0,20}?\(?\bdefaults?(?: is| to|:|,)? `\"?([^`\"]+)\"?`", text):
        declared = _declared_default(name)
        if declared is not None and value != declared:
            wrong.append(f"{name}: the doc says {value!r}, the code {declared!r}")
    function_default = r"`(?:spark_kafka_share\.)?(\w+)\(\)`[^`|]{0,60}?\bdefaults?(?: is| to|:|,)? `\"?([^`\"]+)\"?`"
    for name, value in re.findall(function_default, text):
        declared = _python_defaults().get(name)
        if declared is not None and value != declared:
            wrong.append(f"{name}(): the doc says {value!r}, the code {declared!r}")
    for name, amount, unit in re.findall(r"`([\w.]+\.ms)` \((?:default )?(\d+(?:\.\d+)?) (ms|s|min)\b", text):
        declared = _declared_default(name)
        millis = float(amount) * {"ms": 1, "s": 1000, "min": 60_000}[unit]
        if declared is not None and declared.isdigit() and millis != float(declared):
            wrong.append(f"{name}: the doc says {amount} {unit}, the code {declared} ms")
    values = re.findall(r"`([\w.]+)=([\w-]+)`", text)  # `option=value` in prose
    values += re.findall(r'\.option\("([\w.]+)", "([^"]*)"\)', text)  # .option("key", "value") in Scala and Python
    values += re.findall(r'\b([a-z]+(?:_[a-z]+)+)="([^"]*)"', " ".join(_python_blocks(page.read_text())))  # field="value"
    for name, value in values:
        choices = next((o.get("values") for o in _spec() if name in (o["key"], o["python"]) and o["kind"] == "choice"), None)
        if choices is not None and value not in choices:
            wrong.append(f"{name}={value}: the values are {choices}")
    assert not wrong, f"{_id(page)} states defaults or values the code does not have: {wrong}"


def _versions() -> dict[str, str]:
    pairs = (line.split("=", 1) for line in (ROOT / "versions.properties").read_text().splitlines() if "=" in line)
    return {k.strip(): v.strip() for k, v in pairs if not k.startswith("#")}


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_the_bundled_kafka_clients_version_is_the_builds(page: Path) -> None:
    text = re.sub(r"\s+", " ", page.read_text())
    stated = re.findall(r"kafka-clients (\d+\.\d+(?:\.\d+)?) shaded|bundled kafka-clients[^|]{0,12}\| (\d+\.\d+(?:\.\d+)?)", text)
    stated += re.findall(r"bundled client is kafka-clients (\d+\.\d+(?:\.\d+)?)", text)
    versions = {v for pair in stated for v in (pair if isinstance(pair, tuple) else (pair,)) if v}
    assert versions <= {_versions()["kafka.clients"]}, f"{_id(page)}: kafka-clients {versions}, the build bundles {_versions()}"


def test_readme_and_install_page_list_the_same_supported_versions() -> None:
    def table(page: Path) -> str:
        text = page.read_text()
        return text[text.index("## Supported versions") :].split("\n\n")[0]

    assert table(ROOT / "README.md") == table(ROOT / "docs" / "guide" / "install.md")


def test_the_user_guide_reads_in_an_afternoon() -> None:
    size = sum(len(p.read_bytes()) for p in (ROOT / "docs" / "guide").glob("*.md"))
    assert size < 60 * 1024, f"docs/guide/ is {size:,} bytes; keep it under 60 KB (measurements go to docs/internals/)"
