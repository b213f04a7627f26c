"""One measured read for the benchmark: a streaming query into the noop sink until `records` arrived.

Usage: spark_read.py '<json config>'. Prints one JSON line: records read and the seconds they took.
Config: source ("kafka-share" or "kafka"), bootstrap, topic, group, records, parallelism, strategy,
master, packages (Maven coordinates for spark.jars.packages, for Spark's own Kafka source), work_ms
(blocking work per record), work_in ("python": a Python UDF, default; "jvm": Thread.sleep), driver_java_options
(a profiler, for example), measure_heap (heap after a full GC after the first batch and at the end, and each batch's source
metrics), metrics ("on": the connector's plugin, which configure() adds, and a CSV sink that reads every
metric each second; "off": no plugin, so Spark's metrics system never sees the source; "sink": the CSV sink
without the plugin, Spark's own metrics only; unset: the plugin, no sink, as "plugin" does), progress_file
(where to write every progress of the query, as a JSON list). Prints also the
median of each phase of a measured batch (Spark's durationMs).

The clock runs from the end of the first batch that read records to the end of the batch that read
the last one: both sources then count reading, not JVM start, Ivy resolution or a share consumer's
first assignment (which comes with a heartbeat, seconds after it joins). The first batch is a warm-up.
With "clock": "records" (`make bench`) it runs instead from the first record to the last, as every
contender of the benchmark is clocked: each row gets the time its task produced it (System.currentTimeMillis,
through Spark's reflect), and a foreachBatch keeps each batch's earliest and latest time and its count.
"""

import json
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

import spark_kafka_share

config = json.loads(sys.argv[1])
builder = (
    SparkSession.builder.master(config.get("master", "local[2]"))
    .config("spark.ui.enabled", "false")
    .config("spark.sql.shuffle.partitions", "2")
    .config("spark.sql.streaming.numRecentProgressUpdates", "100000")
)
if config.get("driver_java_options"):  # a profiler, for example (docs/internals/performance.md)
    builder = builder.config("spark.driver.extraJavaOptions", config["driver_java_options"])
if config["source"] == "kafka-share":
    builder = spark_kafka_share.configure(builder)
    if config.get("metrics") in ("off", "sink"):
        builder = builder.config("spark.plugins", "")
    if config.get("metrics") in ("on", "sink"):
        # A sink that reads every gauge each second: more often than any scraper would.
        sink = "spark.metrics.conf.*.sink.csv."
        builder = builder.config(sink + "class", "org.apache.spark.metrics.sink.CsvSink")
        builder = builder.config(sink + "period", "1").config(sink + "unit", "seconds")
        metrics_dir = tempfile.mkdtemp(prefix="kafka-share-bench-metrics-")
        builder = builder.config(sink + "directory", metrics_dir)
else:
    builder = builder.config("spark.jars.packages", config["packages"])
spark = builder.getOrCreate()
spark.sparkContext.setLogLevel(config.get("log_level", "ERROR"))

reader = (
    spark.readStream.format(config["source"])
    .option("kafka.bootstrap.servers", config["bootstrap"])
    .option("subscribe", config["topic"])
    .option("startingOffsets", "earliest")
)
if config["source"] == "kafka-share":
    reader = reader.options(
        **{
            "kafka.share.group.id": config["group"],
            "kafka.share.parallelism": str(config["parallelism"]),
            "kafka.share.exactly.once.strategy": config["strategy"],
        }
    )
else:
    reader = reader.option("minPartitions", str(config["parallelism"]))
for key, value in (config.get("options") or {}).items():
    reader = reader.option(key, str(value))
frame = reader.load()
if config.get("work_ms") and config.get("work_in") == "jvm":
    # The same blocking work without Python workers: Thread.sleep in the executor JVM, whole milliseconds.
    frame = frame.selectExpr(f"reflect('java.lang.Thread', 'sleep', CAST({int(config['work_ms'])} AS BIGINT)) AS work")
elif config.get("work_ms"):
    # Blocking work per record (a call to a service, say), in Python workers: the scaling benchmark.
    from pyspark.sql.functions import udf

    pause = float(config["work_ms"]) / 1000

    @udf("int", useArrow=False)  # pyarrow is not in the test virtualenv
    def work(value: bytes) -> int:
        time.sleep(pause)
        return len(value)

    frame = frame.select(work("value").alias("work"))
by_record = config.get("clock") == "records"
seen: list[tuple[int, int, int]] = []  # per batch with records: earliest and latest row time (ms), rows


def clock_rows(batch: Any, batch_id: int) -> None:
    # sum(work) keeps the per-record work (scaling benchmark) from being pruned away with its column.
    work = ["sum(work) AS w"] if "work" in batch.columns else []
    row = batch.selectExpr("min(t) AS first", "max(t) AS last", "count(*) AS n", *work).collect()[0]
    if row.n:
        seen.append((int(row.first), int(row.last), int(row.n)))


if by_record:
    # The time a row left its task's work: after the per-record work, where there is some.
    kept = "work" if config.get("work_ms") else "value"
    frame = frame.selectExpr(kept, "CAST(reflect('java.lang.System', 'currentTimeMillis') AS BIGINT) AS t")
    writer = frame.writeStream.foreachBatch(clock_rows)
else:
    writer = frame.writeStream.format("noop")
query = writer.option("checkpointLocation", config["checkpoint"]).trigger(processingTime="0 seconds").start()


def batch_end(progress: dict[str, Any]) -> float:
    started = datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()
    return started + float(progress["durationMs"]["triggerExecution"]) / 1000


def heap_after_gc() -> int:
    """Heap in use after a full collection, in this app's JVM (local mode: the driver and the executor)."""
    jvm = spark._jvm
    assert jvm is not None
    jvm.java.lang.System.gc()
    return int(jvm.java.lang.management.ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed())


deadline = time.time() + float(config.get("timeout_s", 900))


def read() -> list[dict[str, Any]]:
    return [p for p in query.recentProgress if p["numInputRows"] > 0]


def arrived() -> int:
    return sum(n for _, _, n in seen) if by_record else sum(p["numInputRows"] for p in read())


heap: dict[str, int] = {}
while arrived() < config["records"] and time.time() < deadline and query.isActive:
    if config.get("measure_heap") and "after_first_batch" not in heap and read():
        heap["after_first_batch"] = heap_after_gc()
    time.sleep(0.5)
batches = read()
if config.get("measure_heap"):
    heap["at_end"] = heap_after_gc()
if query.exception():  # a failed query must not pass for a slow one
    raise RuntimeError(f"the query failed: {query.exception()}")
if config.get("progress_file"):  # every progress of the run, for a look at one slow run (docs/internals/performance.md)
    Path(config["progress_file"]).write_text(json.dumps([json.loads(p.json) for p in query.recentProgress]))
query.stop()
published = 0  # with the metrics on: the source's series the sink wrote (a run without any is no "on" run)
if config.get("metrics") == "on":
    time.sleep(1.5)  # one more report of the sink
    names = [f.name for f in Path(metrics_dir).iterdir() if "KafkaSharePlugin" in f.name]
    published = len(names)
    # The JVM-wide series exist from the plugin's start: a query's own backlog gauge shows its figures came.
    if not any(n.endswith(".backlogRecords.csv") and ".topic." not in n for n in names):
        raise RuntimeError(f"metrics on, but the CSV sink wrote no backlog series of the query in {metrics_dir}: {names}")
total = sum(p["numInputRows"] for p in batches)
measured = total - batches[0]["numInputRows"] if batches else 0
seconds = max(batch_end(batches[-1]) - batch_end(batches[0]), 1e-9) if batches else 0.0
if by_record and seen:
    total = measured = sum(n for _, _, n in seen)
    seconds = max((max(last for _, last, _ in seen) - min(first for first, _, _ in seen)) / 1000, 1e-3)
# Where a measured batch's time went (Spark's durationMs: latestOffset, walCommit, addBatch, commitOffsets...).
phases = sorted({k for p in batches[1:] for k in p["durationMs"]})
median_ms = {k: sorted(p["durationMs"].get(k, 0) for p in batches[1:])[len(batches[1:]) // 2] for k in phases}
print(
    json.dumps(
        {
            "records": total,
            "complete": total >= config["records"],
            "measured_records": measured,
            "seconds": round(seconds, 3),
            "records_per_s": round(measured / seconds) if measured else 0,
            "batches": len(batches),
            "median_batch_ms": median_ms,
            "published_series": published,
            **(
                {"heap": heap, "source_metrics": [b["sources"][0].get("metrics", {}) for b in batches]}
                if config.get("measure_heap")
                else {}
            ),
        }
    )
)
spark.stop()
