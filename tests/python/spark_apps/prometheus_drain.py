"""A backlog drains while Spark's Prometheus endpoint is scraped over HTTP, as docs/guide/observability.md sets
it up (the PrometheusServlet sink, spark.ui.prometheus.enabled, a fixed namespace), with the JMX sink on too.

Usage: prometheus_drain.py '<json config>'. Config keys: bootstrap, topic, group, records (already produced),
per_batch (maxRecordsPerTrigger), timeout_s. The query is named "drain" and writes to the noop sink.
Prints one JSON line: every scrape of the query's backlog while it ran (its gauge, its topic's gauge, the
age and lock figures), every backlogRecords its progress reported, the rows read, what JMX said once the
backlog was 0, and the source's series left in a scrape after the query stopped.
"""

import json
import re
import sys
import time
import urllib.request
from typing import Any

from pyspark.sql import SparkSession

import spark_kafka_share

config = json.loads(sys.argv[1])
servlet = "spark.metrics.conf.*.sink.prometheusServlet"
builder = (
    SparkSession.builder.appName("prometheus-drain")
    .master("local[2]")
    .config("spark.ui.port", "0")
    .config(f"{servlet}.class", "org.apache.spark.metrics.sink.PrometheusServlet")
    .config(f"{servlet}.path", "/metrics/prometheus")
    .config("spark.ui.prometheus.enabled", "true")
    .config("spark.metrics.conf.*.sink.jmx.class", "org.apache.spark.metrics.sink.JmxSink")
    .config("spark.metrics.namespace", "drain-app")
    .config("spark.sql.shuffle.partitions", "2")
    .config("spark.sql.streaming.numRecentProgressUpdates", "10000")
)
spark = spark_kafka_share.configure(builder).getOrCreate()
spark.sparkContext.setLogLevel("WARN")
endpoint = f"{spark.sparkContext.uiWebUrl}/metrics/prometheus"

# The PrometheusServlet's names: metrics_<namespace>_driver_plugin_<plugin class>_<query>_<metric>_Value, every
# character outside [a-zA-Z0-9] as _ (docs/reference/monitoring/prometheus.yml renames them).
PREFIX = "metrics_drain_app_driver_plugin_io_github_kafkashare_spark_KafkaSharePlugin_"
SERIES = re.compile(rf"^{PREFIX}(\S+)_Value\{{type=\"gauges\"\}} (\S+)$", re.MULTILINE)
BACKLOG_BY_TOPIC = f"drain_topic_{re.sub('[^a-zA-Z0-9]', '_', config['topic'])}_backlogRecords"


def scrape() -> dict[str, float]:
    """The plugin's driver gauges the endpoint serves now, by the name after the prefix."""
    with urllib.request.urlopen(endpoint, timeout=10) as response:
        text = response.read().decode()
    return {name: float(value) for name, value in SERIES.findall(text)}


def jmx_backlog() -> float | None:
    """The query's backlog gauge as the JMX sink publishes it (Dropwizard's JmxReporter: domain metrics, the
    metric's name unquoted where it needs no quotes)."""
    jvm = spark._jvm
    assert jvm is not None
    server = jvm.java.lang.management.ManagementFactory.getPlatformMBeanServer()
    key = "drain-app.driver.plugin.io.github.kafkashare.spark.KafkaSharePlugin.drain.backlogRecords"
    name = jvm.javax.management.ObjectName(f"metrics:name={key},type=gauges")
    # py4j cannot call the platform server's own class (java.management does not export it): the call goes
    # through a proxy of Dropwizard's public gauge interface, as a JMX client's would.
    gauge = jvm.java.lang.Class.forName("com.codahale.metrics.jmx.JmxReporter$JmxGaugeMBean")
    proxy = jvm.javax.management.JMX.newMBeanProxy(server, name, gauge)
    try:
        return float(proxy.getValue())
    except Exception:  # not registered: no such gauge
        return None


query = (
    spark.readStream.format("kafka-share")
    .option("kafka.bootstrap.servers", config["bootstrap"])
    .option("subscribe", config["topic"])
    .option("kafka.share.group.id", config["group"])
    .option("kafka.share.parallelism", "2")
    .option("maxRecordsPerTrigger", str(config["per_batch"]))
    .load()
    .writeStream.format("noop")
    .queryName("drain")
    .option("checkpointLocation", config["checkpoint"])
    .start()
)


def rows_read() -> int:
    return sum(p["numInputRows"] for p in query.recentProgress)


samples: list[dict[str, Any]] = []
deadline = time.monotonic() + float(config["timeout_s"])
while time.monotonic() < deadline and query.isActive:
    served = scrape()
    if "drain_backlogRecords" in served:
        samples.append(
            {
                "backlogRecords": served["drain_backlogRecords"],
                "topicBacklogRecords": served.get(BACKLOG_BY_TOPIC),
                "backlogAgeMs": served.get("drain_backlogAgeMs"),
                "lockUsedPercent": served.get("drain_lockUsedPercent"),
                "recordsAcquiredTotal": served.get("drain_recordsAcquiredTotal"),
            }
        )
    # Done when every record was read and both the progress and the endpoint say the backlog is 0.
    last = query.lastProgress
    if rows_read() >= config["records"] and last and samples and samples[-1]["backlogRecords"] == 0:
        if float(last["sources"][0]["metrics"]["backlogRecords"]) == 0:
            break
    time.sleep(0.3)

failure = str(query.exception()) if query.exception() else None
at_end = {"jmx_backlog": jmx_backlog()}
progress_backlogs = [float(p["sources"][0]["metrics"]["backlogRecords"]) for p in query.recentProgress]
read = rows_read()
query.stop()
# The gauges go when the listener bus delivers the query's end: give it a few seconds.
stopped_deadline = time.monotonic() + 10
while (left := sorted(name for name in scrape() if name.startswith("drain_"))) and time.monotonic() < stopped_deadline:
    time.sleep(0.3)
print(
    json.dumps(
        {
            "samples": samples,
            "progress_backlogs": progress_backlogs,
            "rows": read,
            "at_end": at_end,
            "series_after_stop": left,
            "failure": failure,
        }
    )
)
spark.stop()
