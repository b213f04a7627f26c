"""Two kafka-share queries in one application and one share group, each on its own topic, into its
own per-batch Parquet sink; the driver may be killed at a moment.

Usage: two_queries.py '<json config>'. Config keys: bootstrap, group, strategy, topics (two names),
work (a directory: checkpoint-<topic> and sink-<topic> go there), expected (records per topic),
timeout_s, kill_after_s (kill the driver that many seconds after both queries committed a batch of
this run) with kill_note (a file that receives each topic's distinct count at the kill), options
(extra source options). Prints one JSON line at the end: for each topic the rows
its sink holds, their distinct keys, and the rows that came from another topic; and how many times a
query failed and was started again.

The sink writes batch N to <sink>/batch=N with mode overwrite: idempotent per batch id.
"""

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.functions import col
from pyspark.sql.streaming.query import StreamingQuery

import spark_kafka_share

config = json.loads(sys.argv[1])
work = Path(config["work"])
topics: list[str] = config["topics"]

spark = (
    spark_kafka_share.configure(SparkSession.builder)
    .master("local[2,4]")
    .config("spark.sql.shuffle.partitions", "2")
    .config("spark.ui.enabled", "false")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")
_log4j = spark._jvm.org.apache.logging.log4j  # type: ignore[union-attr]
_log4j.core.config.Configurator.setLevel("io.github.kafkashare.spark", _log4j.Level.INFO)


def sink_of(topic: str) -> Path:
    return work / f"sink-{topic}"


def checkpoint_of(topic: str) -> Path:
    return work / f"checkpoint-{topic}"


def writer_for(topic: str) -> Callable[[DataFrame, int], None]:
    def write(df: DataFrame, batch_id: int) -> None:
        rows = df.select(col("key").cast("string").alias("k"), "topic", "partition", "offset")
        rows.write.mode("overwrite").parquet(str(sink_of(topic) / f"batch={batch_id}"))

    return write


def start(topic: str) -> StreamingQuery:
    reader = (
        spark.readStream.format("kafka-share")
        .option("kafka.bootstrap.servers", config["bootstrap"])
        .option("kafka.share.group.id", config["group"])
        .option("startingOffsets", "earliest")
        .option("subscribe", topic)
        .option("kafka.share.exactly.once.strategy", config["strategy"])
        .option("kafka.share.parallelism", "2")
    )
    for k, v in (config.get("options") or {}).items():
        reader = reader.option(k, str(v))
    return (
        reader.load()
        .writeStream.foreachBatch(writer_for(topic))
        .option("checkpointLocation", str(checkpoint_of(topic)))
        .trigger(processingTime="200 milliseconds")
        .start()
    )


def committed(topic: str) -> int:
    commits = checkpoint_of(topic) / "commits"
    return len([f for f in commits.iterdir() if f.name.isdigit()]) if commits.exists() else 0


def counts(topic: str) -> dict[str, int]:
    """Rows, distinct keys of this topic, and rows of another topic; zeros while a batch is rewritten."""
    try:
        df = spark.read.parquet(str(sink_of(topic)))
        own = df.where(col("topic") == topic)
        return {"rows": own.count(), "distinct": own.select("k").distinct().count(), "foreign": df.count() - own.count()}
    except Exception:
        return {"rows": 0, "distinct": 0, "foreign": 0}


def kill_driver_later(after_s: float, note: Path) -> None:
    """Kills the driver JVM, then this process, after_s seconds after each query committed a batch of
    this run (or has everything: it runs no batch any more). Writes each topic's distinct count at that
    moment to `note` first, so that the test knows which queries were mid-stream."""
    before = {t: committed(t) for t in topics}
    jvm_pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[union-attr]

    def run() -> None:
        while any(committed(t) <= before[t] and counts(t)["distinct"] < int(config["expected"]) for t in topics):
            time.sleep(0.5)
        time.sleep(after_s)
        note.write_text(json.dumps({t: counts(t)["distinct"] for t in topics}))
        os.kill(jvm_pid, signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=run, daemon=True).start()


queries = {t: start(t) for t in topics}
if config.get("kill_after_s") is not None:
    kill_driver_later(float(config["kill_after_s"]), Path(config["kill_note"]))
restarts = 0
deadline = time.time() + float(config.get("timeout_s", 150))
while time.time() < deadline:
    for t, q in queries.items():
        if q.exception() is not None or not q.isActive:
            restarts += 1
            queries[t] = start(t)
    if all(counts(t)["distinct"] >= int(config["expected"]) for t in topics):
        time.sleep(3)  # a record landing twice, or in the other query, would show in these seconds
        break
    time.sleep(2)  # each check reads both sinks: a few Spark jobs
for q in queries.values():
    q.stop()
print(json.dumps({"queries": {t: counts(t) for t in topics}, "restarts": restarts}))
spark.stop()
