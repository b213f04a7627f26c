"""Several kafka-share queries in one application, one per strategy (and explicit mode), each on its own
topic and group: the first run of a hand-over, stopped inside a slow foreachBatch, or the run after it.

Usage: hand_over.py '<json config>'. Config keys: bootstrap, work (a directory), phase, checkpoint (a
name: query q's checkpoint is <work>/<q>/checkpoint-<name>), expected (records per topic), queries (a list
of {name, topic, group, strategy, mode, read_first}), timeout_s.

Phases:
  stop     each query's first batch with rows is slow: its foreachBatch sleeps slow_s, and stop_after_s
           into that sleep another thread calls query.stop(), as a user stopping a deployment would. A
           query with read_first reads the batch before the sleep (a count: its records are acquired,
           pinned and, for two-phase commit and explicit mode, held), else only after it. Then the
           foreachBatch writes the batch (explicit mode: and accepts it), which Spark's stop does not wait
           for in Python. The application ends when every query has stopped.
  kill     the same slow first batch, but once every query is inside it the driver is SIGKILLed.
  recover  each query runs once with Trigger.Once on its checkpoint (a batch cut by a stop or a crash is
           run again: it replays its pinned records) and the application ends.
  finish   the queries read until each sink holds every key (or timeout_s), then stop.

The sink of query q writes batch N of checkpoint c to <work>/<q>/sink/run=<c>/batch=N (mode overwrite: idempotent
per batch id within a checkpoint). Prints one JSON line: per query, the seconds from its start to its first
batch with rows and to its last key landed (finish), and whether it stopped (stop).
"""

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

import spark_kafka_share

config = json.loads(sys.argv[1])
work = Path(config["work"])
phase = config["phase"]
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


def sink_of(q: dict[str, Any]) -> Path:
    return work / str(q["name"]) / "sink"


class Query:
    def __init__(self, q: dict[str, Any]) -> None:
        self.q = q
        self.started = time.time()
        self.first_rows_s: float | None = None
        self.stopping = threading.Event()
        # Every key the sink has, from earlier runs too (the test counts the sink's files itself).
        self.keys: set[str] = set()
        try:
            self.keys = {r.k for r in spark.read.parquet(str(sink_of(q))).select("k").distinct().collect()}
        except Exception:  # no sink yet, or only empty batches: Spark finds no schema to infer
            pass
        self.query = self.start()

    def process(self, batch: DataFrame, batch_id: int) -> None:
        run = config["checkpoint"]  # batch ids are per checkpoint: an idempotent sink keeps one copy per batch id
        rows = batch.select(F.col("key").cast("string").alias("k"), "topic", "partition", "offset").cache()
        slow = phase in ("stop", "kill") and not self.stopping.is_set()
        if slow and not self.q.get("read_first"):
            self.slow_down()
        elif rows.count() == 0:  # the read: records acquired and pinned now
            return
        elif slow:
            self.slow_down()
        rows.write.mode("overwrite").parquet(str(sink_of(self.q) / f"run={run}" / f"batch={batch_id}"))
        if self.first_rows_s is None:
            self.first_rows_s = round(time.time() - self.started, 1)
        self.keys.update(r.k for r in rows.select("k").collect())
        if self.q.get("mode") == "explicit":
            spark_kafka_share.acknowledge(rows.withColumn("decision", F.lit("accept")), batch_id, self.q["group"])

    def slow_down(self) -> None:
        self.stopping.set()
        if phase == "stop":
            threading.Thread(target=self.stop_later, daemon=True).start()
        time.sleep(float(config.get("slow_s", 4)))

    def stop_later(self) -> None:
        time.sleep(float(config.get("stop_after_s", 1)))
        self.query.stop()

    def start(self) -> StreamingQuery:
        q = self.q
        reader = (
            spark.readStream.format("kafka-share")
            .option("kafka.bootstrap.servers", config["bootstrap"])
            .option("kafka.share.group.id", q["group"])
            .option("startingOffsets", "earliest")
            .option("subscribe", q["topic"])
            .option("kafka.share.exactly.once.strategy", q["strategy"])
            .option("kafka.share.acknowledgment.mode", q.get("mode", "implicit"))
            .option("kafka.share.parallelism", "2")
            # The first run's batches are small (the stopped one is a part of the records); then all at once.
            .option("maxRecordsPerTrigger", "600" if phase in ("stop", "kill") else "100000")
        )
        process: Callable[[DataFrame, int], None] = self.process
        writer = (
            reader.load()
            .writeStream.foreachBatch(process)
            .option("checkpointLocation", str(work / q["name"] / f"checkpoint-{config['checkpoint']}"))
        )
        writer = writer.trigger(once=True) if phase == "recover" else writer.trigger(processingTime="500 milliseconds")
        return writer.start()


queries = [Query(q) for q in config["queries"]]
deadline = time.time() + float(config.get("timeout_s", 120))
result: dict[str, Any] = {}
if phase == "stop":
    while time.time() < deadline and any(q.query.isActive for q in queries):
        time.sleep(0.5)
    for q in queries:
        result[q.q["name"]] = {"stopped_inside_batch": q.stopping.is_set(), "active": q.query.isActive}
        q.query.stop()
elif phase == "kill":
    while time.time() < deadline and not all(q.stopping.is_set() for q in queries):
        time.sleep(0.2)
    time.sleep(float(config.get("stop_after_s", 1)))
    os.kill(int(spark._jvm.java.lang.ProcessHandle.current().pid()), signal.SIGKILL)  # type: ignore[union-attr]
    os.kill(os.getpid(), signal.SIGKILL)
elif phase == "recover":
    for q in queries:
        q.query.awaitTermination(int(config.get("timeout_s", 120)))
        result[q.q["name"]] = {"exception": str(q.query.exception()) if q.query.exception() else None}
else:
    done: dict[str, float] = {}
    while time.time() < deadline and len(done) < len(queries):
        for q in queries:
            if q.q["name"] not in done and len(q.keys) >= int(config["expected"]):
                done[q.q["name"]] = round(time.time() - q.started, 1)
        time.sleep(1)
    time.sleep(3)  # a record landing twice would show in these seconds
    for q in queries:
        q.query.stop()
        result[q.q["name"]] = {"first_rows_s": q.first_rows_s, "all_landed_s": done.get(q.q["name"])}
print(json.dumps(result))
spark.stop()
