"""The scrape job, alert rules and dashboard of docs/reference/monitoring/ name only series the source publishes.

Pure Python, no Spark and no Prometheus. What the source publishes: the progress metrics docs/reference/metrics.md
lists (a Scala suite keeps that table equal to the code), each a driver gauge of the plugin per query, the backlog
per topic, and the plugin's JVM-wide figures. Those are written as Spark's PrometheusServlet writes them; the scrape
job's metric_relabel_configs are applied to them as Prometheus applies them (anchored regexes, Go's $name
expansion); every series the rules and panels use must come out, with the labels they select on.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, Optional

import pytest
import yaml

from harness import ROOT

MONITORING = ROOT / "docs" / "reference" / "monitoring"
PLUGIN = "io.github.kafkashare.spark.KafkaSharePlugin"
# The plugin's JVM-wide figures, in every JVM (driver and executors), with their Dropwizard kind. Not progress
# metrics, so not in metrics.md's table.
JVM_WIDE = {"jvm.shareConsumers": "gauge", "jvm.readTasks": "gauge", "jvm.recordsRenewed": "counter"}
# A namespace and names with the characters Spark turns into _, to see what the labels keep.
NAMESPACE, QUERIES, TOPICS = "orders-app", ("orders", "eu-payments.v2"), ("orders", "payments.eu")
# Labels every scraped series has from its target.
TARGET_LABELS = frozenset({"job", "instance"})


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).replace(".", "_").lower()


def _sanitized(name: str) -> str:
    """PrometheusServlet.normalizeKey's character rule: everything outside [a-zA-Z0-9] becomes _."""
    return re.sub(r"[^a-zA-Z0-9]", "_", name)


@functools.cache
def progress_metrics() -> tuple[str, ...]:
    text = (ROOT / "docs" / "reference" / "metrics.md").read_text()
    table = text[text.index("## Query progress metrics") :].split("\n\n")[0]
    return tuple(re.findall(r"^\| `(\w+)` \|", table, flags=re.M))


def _exposed(key: str, kind: str) -> list[str]:
    """The lines PrometheusServlet writes for one metric of the registry: a gauge twice, a counter once."""
    name = f"metrics_{_sanitized(key)}_"
    return [f"{name}Number", f"{name}Value"] if kind == "gauge" else [f"{name}Count"]


def spark_series() -> dict[str, tuple[str, dict[str, str]]]:
    """Each series of the plugin as the driver's /metrics/prometheus has it, with the series relabelling must make."""
    source = f"{NAMESPACE}.driver.plugin.{PLUGIN}"
    labels = {"namespace": _sanitized(NAMESPACE)}
    series: dict[str, tuple[str, dict[str, str]]] = {}
    for query in QUERIES:
        query_labels = {**labels, "query": _sanitized(query)}
        for metric in progress_metrics():
            if metric in ("backlogRecordsByTopic", "parallelismReason"):  # strings: per topic instead, or not at all
                continue
            *_, value = _exposed(f"{source}.{query}.{metric}", "gauge")
            series[value] = (f"kafka_share_{snake(metric)}", query_labels)
        for topic in TOPICS:
            *_, value = _exposed(f"{source}.{query}.topic.{topic}.backlogRecords", "gauge")
            series[value] = ("kafka_share_backlog_records", {**query_labels, "topic": _sanitized(topic)})
    for metric, kind in JVM_WIDE.items():
        *_, last = _exposed(f"{source}.{metric}", kind)
        series[last] = (f"kafka_share_{snake(metric)}", {**labels, "executor": "driver"})
    return series


def _type(spark_name: str) -> str:
    return "counters" if spark_name.endswith("_Count") else "gauges"


# Spark's own series, which the job must leave alone.
OTHERS = [
    "metrics_orders_app_driver_DAGScheduler_job_activeJobs_Value",
    "metrics_orders_app_driver_BlockManager_memory_maxMem_MB_Number",
    "metrics_orders_app_driver_LiveListenerBus_numEventsPosted_Count",
]


# ---------------------------------------------------------------------------------------------------------------
# Prometheus's relabelling, for the actions the scrape job uses


def _expand(template: str, match: re.Match[str]) -> str:
    """Go's Regexp.Expand: $1, ${1}, $name; a name is as long as it can be ($1x is the group named 1x: empty)."""

    def group(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1) or m.group(2)
        try:
            value = match.group(int(name)) if name.isdigit() else match.group(name)
        except IndexError:  # no such group, by number or by name
            return ""
        return value or ""

    return re.sub(r"\$(?:\{(\w+)\}|(\w+)|\$)", group, template)


def relabel(labels: dict[str, str], configs: list[dict[str, Any]]) -> Optional[dict[str, str]]:
    """The series after metric_relabel_configs, or None when dropped."""
    labels = dict(labels)
    for config in configs:
        action = config.get("action", "replace")
        regex = re.compile(f"^(?:{config.get('regex', '(.*)')})$")
        value = config.get("separator", ";").join(labels.get(name, "") for name in config.get("source_labels", []))
        if action == "replace":
            match = regex.match(value)
            if match:
                target = _expand(config["target_label"], match)
                result = _expand(str(config.get("replacement", "$1")), match)
                if result:
                    labels[target] = result
                else:
                    labels.pop(target, None)
        elif action in ("drop", "keep"):
            if bool(regex.match(value)) == (action == "drop"):
                return None
        elif action in ("labeldrop", "labelkeep"):
            labels = {k: v for k, v in labels.items() if bool(regex.match(k)) != (action == "labeldrop")}
        else:
            raise AssertionError(f"the relabelling here does not do {action}: add it, as Prometheus documents it")
    return labels


@functools.cache
def _scrape_job() -> dict[str, Any]:
    config = yaml.safe_load((MONITORING / "prometheus.yml").read_text())
    (job,) = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics/prometheus", "PrometheusServlet's path on the driver (Spark's default)"
    return dict(job)


def _scraped(spark_name: str) -> Optional[dict[str, str]]:
    labels = {"__name__": spark_name, "type": _type(spark_name), "job": "spark-driver", "instance": "driver:4040"}
    return relabel(labels, _scrape_job()["metric_relabel_configs"])


@functools.cache
def produced() -> dict[str, frozenset[str]]:
    """Every series name the scrape job makes of the plugin's series, with the labels each has."""
    names: dict[str, set[str]] = {}
    for spark_name in spark_series():
        out = _scraped(spark_name)
        assert out is not None, spark_name
        names.setdefault(out.pop("__name__"), set()).update(out)
    return {name: frozenset(labels) for name, labels in names.items()}


# ---------------------------------------------------------------------------------------------------------------
# What the rules and panels use


def unknown_series(expression: str) -> list[str]:
    """The kafka_share_ series an expression names that the scrape job does not make, or selects on a label they
    lack (`label=""` asks for its absence, and is fine)."""
    wrong = []
    for name, selector in re.findall(r"\b(kafka_share_\w+)(?:\{([^}]*)\})?", expression):
        if name not in produced():
            wrong.append(name)
            continue
        for label, op, value in re.findall(r'(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"', selector):
            if label not in produced()[name] | TARGET_LABELS and not (op == "=" and value == ""):
                wrong.append(f"{name}{{{label}}}")
    return wrong


def _alert_rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load((MONITORING / "alerts.yml").read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def _dashboard() -> dict[str, Any]:
    dashboard: dict[str, Any] = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    return dashboard


def _dashboard_expressions(dashboard: dict[str, Any]) -> list[str]:
    panels = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    return panels + [v["definition"] for v in dashboard["templating"]["list"] if v["type"] == "query"]


# ---------------------------------------------------------------------------------------------------------------
# The checks


def test_the_metrics_table_is_there_to_read() -> None:
    assert {"backlogRecords", "recordsAtLastDeliveryTotal", "lastBatch", "lockUsedPercent"} <= set(progress_metrics())


@pytest.mark.parametrize("spark_name", sorted(spark_series()), ids=lambda n: n.split("KafkaSharePlugin_")[-1])
def test_each_series_of_the_plugin_gets_its_name_and_labels(spark_name: str) -> None:
    name, labels = spark_series()[spark_name]
    assert _scraped(spark_name) == {"__name__": name, **labels, "job": "spark-driver", "instance": "driver:4040"}


def test_spark_writes_each_gauge_twice_and_the_job_keeps_one() -> None:
    for spark_name in spark_series():
        if spark_name.endswith("_Value"):
            assert _scraped(spark_name.removesuffix("Value") + "Number") is None, spark_name


def test_no_two_series_of_the_plugin_become_one() -> None:
    seen: dict[str, str] = {}
    for spark_name in spark_series():
        out = _scraped(spark_name)
        key = json.dumps(out, sort_keys=True)
        assert key not in seen, f"{spark_name} and {seen.get(key)} both become {out}"
        seen[key] = spark_name


@pytest.mark.parametrize("spark_name", OTHERS)
def test_sparks_other_series_are_left_alone(spark_name: str) -> None:
    labels = {"__name__": spark_name, "type": _type(spark_name), "job": "spark-driver", "instance": "driver:4040"}
    assert relabel(labels, _scrape_job()["metric_relabel_configs"]) == labels


@pytest.mark.parametrize("rule", _alert_rules(), ids=lambda r: str(r["alert"]))
def test_each_alert_rule_names_series_the_source_publishes(rule: dict[str, Any]) -> None:
    assert not unknown_series(rule["expr"]), f"{rule['alert']}: {unknown_series(rule['expr'])} (published: {sorted(produced())})"
    assert rule["labels"]["severity"] in {"warning", "critical"} and rule["annotations"]["summary"], rule


def test_the_alerts_are_the_ones_observability_explains() -> None:
    alerts = {r["alert"] for r in _alert_rules()}
    guide = (ROOT / "docs" / "guide" / "observability.md").read_text()
    assert alerts == set(re.findall(r"`(KafkaShare[A-Za-z]+)`", guide)), "each rule is explained in observability.md"


def test_each_panel_names_series_the_source_publishes() -> None:
    wrong = {e: unknown_series(e) for e in _dashboard_expressions(_dashboard()) if unknown_series(e)}
    assert not wrong, f"{wrong} (published: {sorted(produced())})"


def test_the_dashboard_imports_with_a_data_source_and_a_query_to_pick() -> None:
    dashboard = _dashboard()
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert variables["query"]["type"] == "query" and variables["query"]["includeAll"]
    for panel in dashboard["panels"]:
        assert panel["targets"] and panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert all(t["datasource"]["uid"] == "${datasource}" for t in panel["targets"]), panel["title"]
    used = {n for e in _dashboard_expressions(dashboard) for n in re.findall(r"\bkafka_share_\w+", e)}
    shown = {"backlog_records", "backlog_age_ms", "emitted_age_max_ms", "emitted_age_p99_ms", "lock_used_percent"}
    shown |= {f"records_{m}_total" for m in ("acquired", "accepted", "released", "rejected", "replayed")}
    shown |= {"redeliveries_dropped_total", "jvm_share_consumers", "jvm_read_tasks"}
    assert {f"kafka_share_{n}" for n in shown} <= used, "the dashboard shows what observability.md says it does"


def test_a_name_the_source_does_not_publish_is_caught() -> None:
    """The check itself: a misspelt series, a label the series lacks, and an old Spark-side name are refused."""
    assert unknown_series('kafka_share_backlog_record{query="orders"}') == ["kafka_share_backlog_record"]
    assert unknown_series('kafka_share_backlog_age_ms{topic="orders"}') == ["kafka_share_backlog_age_ms{topic}"]
    assert unknown_series('kafka_share_jvm_read_tasks{query="orders"}') == ["kafka_share_jvm_read_tasks{query}"]
    assert unknown_series('kafka_share_lock_used_percent{topic=""} > 80') == []
    assert unknown_series("kafka_share_lockUsedPercent > 80") == ["kafka_share_lockUsedPercent"]


def test_the_relabelling_follows_prometheus() -> None:
    """Anchored regexes, a label removed when set to nothing, Go's $1x as the group named 1x (nothing)."""
    configs = [
        {"source_labels": ["a"], "regex": "b", "target_label": "x", "replacement": "partial"},
        {"source_labels": ["a"], "regex": "(a)(b)c", "target_label": "y", "replacement": "$1x-${2}x"},
        {"source_labels": ["a"], "regex": ".*", "target_label": "type", "replacement": ""},
    ]
    assert relabel({"a": "abc", "type": "gauges"}, configs) == {"a": "abc", "y": "-bx"}


def test_the_files_are_where_the_guide_says() -> None:
    guide = (ROOT / "docs" / "guide" / "observability.md").read_text()
    for file in ("prometheus.yml", "alerts.yml", "grafana-dashboard.json"):
        assert (MONITORING / file).is_file() and f"monitoring/{file}" in guide, file
