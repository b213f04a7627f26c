"""A kafka-share query into an idempotent per-batch Parquet sink, with failures injected on demand.

Usage: share_stream.py '<json config>'. Prints one JSON line at the end: what the sink holds.
Config keys: bootstrap, topic, group, strategy, parallelism, checkpoint, sink, expected (records to
wait for), timeout_s, failure (F1 to F10 or none; see inject_* below), failure_batch (the batch
F1, F2, F4, F5 and F10 hit, 1 by default), inject_after_s (F3, F6, F7: seconds after the first
batch landed), marker (a file that makes a failure happen once; it receives the time of the
injection), broker_dir and broker_version (F6: the broker to restart), pause_s (F7),
stop_after_batches (stop after that many non-empty batches), options (extra options), trigger
("processing" or "available_now"), trigger_interval (of the processing-time trigger), idle_check_s (after everything
landed, stay running that long and report how many batches ran meanwhile), status_file (the sink's
distinct count, rewritten every status_every_s seconds, 1 by default), until_file (run until it
exists instead of until `expected` landed), report_keys, pid_file (receives {"pid": driver JVM,
"app_id": ...} at start), union_rate (union the source with a `rate` stream), sink_format (Spark's
file sink in that format instead of foreachBatch), stop_spark_when_ended (Trigger.AvailableNow: stop
Spark the moment the query ends, as a job that ends with it does, and count the sink without
Spark), watermark (a watermarked stateful query instead: each event-time window's record keys
collected in state, written in update mode; Spark runs no-data batches and restores state on a
replay), delta (foreachBatch appends to a Delta table, idempotent through txnAppId/txnVersion;
delta_jars: the Delta jars, comma-separated), spark_conf (more Spark settings: a checkpoint on S3 gives
the S3A jars and settings; checkpoint is then an s3a:// URI), restarts_file (a JSON list that gets the
error of each failed query the loop below starts again, across runs). Failure F4r
kills the driver inject_after_s seconds after the first committed batch, at whatever it is doing.

queries (a list of dicts, each laid over the rest of the config: its own group, strategy, checkpoint, sink,
marker, failure_batch...) runs several queries in this one application, and prints {"queries": [the line
above of each]}. A failure at a batch (F4, F5) then waits until every query reached its own injection
point before the driver dies; a failure at a moment (F3, F4r, F6, F7) strikes once, after every query
committed a batch of this run. One Spark start for several cells: the chaos cells of every strategy.

The sink writes batch N to <sink>/batch=N with mode overwrite, so a re-run batch replaces itself:
an idempotent sink per batch id, as the delivery contract assumes.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from pyspark import TaskContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.functions import col, collect_list, explode, lit, max_by, spark_partition_id, udf, window
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import StringType

import spark_kafka_share

config = json.loads(sys.argv[1])
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import harness  # noqa: E402  (tests/python, for F6 and promise 7)

builder = SparkSession.builder
for key, value in (config.get("spark_conf") or {}).items():
    builder = builder.config(key, value)
if config.get("delta"):
    builder = (
        builder.config("spark.jars", config["delta_jars"])
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
    )
spark = (
    spark_kafka_share.configure(builder)
    .master(config.get("master", "local[2,4]"))  # 4 attempts per task, as on a cluster
    .config("spark.sql.shuffle.partitions", "2")
    .config("spark.ui.enabled", str(bool(config.get("ui"))).lower())
    .getOrCreate()
)
spark.sparkContext.setLogLevel(config.get("log_level", "ERROR"))
# The source's own lines stay in the driver log that conftest keeps per test.
_log4j = spark._jvm.org.apache.logging.log4j  # type: ignore[union-attr]
_log4j.core.config.Configurator.setLevel("io.github.kafkashare.spark", _log4j.Level.INFO)


def fail_once_first_task(batch_id: int):  # type: ignore[no-untyped-def]
    """F1: a UDF in the reading stage that throws in the first attempt of task 0 of this batch."""

    @udf(StringType())
    def maybe_fail(key: str) -> str:
        ctx = TaskContext.get()
        if ctx is not None and ctx.partitionId() == 0 and ctx.attemptNumber() == 0:
            raise RuntimeError("injected F1: read task fails midway")
        return key

    return maybe_fail


def kill_driver() -> None:
    """The driver process dies: the JVM first (no chance to write anything), then this Python process."""
    os.kill(spark_jvm_pid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def spark_jvm_pid() -> int:
    return int(spark._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[union-attr]


class DriverKill:
    """F4 and F5 with several queries: each query that reaches its injection point waits here; the last
    one to arrive kills the driver, so that every query dies at its own point. Each marker then gets the
    moment of the kill, which is when the failure struck (recovery is measured from it). One query that
    never comes (it failed) does not hold the kill up for more than a few minutes."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.markers: list[Path] = []
        self.lock = threading.Lock()
        self.all_there = threading.Event()

    def arrive(self, marker: Path) -> None:
        with self.lock:
            self.markers.append(marker)
            if len(self.markers) >= self.expected:
                self.all_there.set()
        self.all_there.wait(timeout=180)
        with self.lock:
            for m in self.markers:
                m.write_text(str(time.time()))
            kill_driver()


class ShareQuery:
    """One kafka-share query of this application with its own sink, checkpoint and failure, and the
    state of the loop below that drives it (restarts, how long it may still take)."""

    def __init__(self, c: dict[str, Any], driver_kill: DriverKill) -> None:
        self.c = c
        self.failure = c.get("failure") or "none"
        self.marker = Path(c.get("marker") or "/nonexistent")
        self.sink = c["sink"]
        self.failure_batch = int(c.get("failure_batch", 1))
        self.driver_kill = driver_kill
        self.handle: StreamingQuery | None = None
        self.restarts = 0
        self.done = False
        self.distinct_seen = 0
        self.result: dict[str, object] = {}
        self.status_written = 0.0
        self.deadline = time.time() + float(c.get("timeout_s", 120))
        self.latest_deadline = time.time() + 2 * float(c.get("timeout_s", 120))

    @property
    def query(self) -> StreamingQuery:
        assert self.handle is not None
        return self.handle

    def injected(self) -> None:
        """Notes the moment of the injection: the chaos suite measures recovery from it."""
        self.marker.write_text(str(time.time()))

    def write_batch(self, df: DataFrame, batch_id: int) -> None:
        failure, failure_batch = self.failure, self.failure_batch
        once = not self.marker.exists()
        rows = df.select(
            col("key").cast("string").alias("k"), "partition", "offset", "deliveryCount", spark_partition_id().alias("task")
        )
        if failure == "F1" and batch_id == failure_batch and once:
            self.injected()
            rows = rows.withColumn("k", fail_once_first_task(batch_id)(col("k")))
        if failure == "F8":
            first_count = rows.count()  # a first action on the batch: the source is read twice
        if failure == "F4" and batch_id == failure_batch and once:
            # A batch longer than the lock (slow_batch_s): its held records' locks are renewed meanwhile (Kafka 4.2+).
            time.sleep(float(self.c.get("slow_batch_s", 0)))
            self.injected()
            self.driver_kill.arrive(self.marker)  # after offset log N, before the sink has batch N
        if failure == "F10" and self.poison_failures() < 3 and rows.filter(col("k") == self.c.get("poison_key", "7")).count():
            # A record the code cannot process: its batch fails and the query stops; it is restarted
            # (below) and runs the same batch again, three times, until "the fix is deployed".
            if self.poison_failures() == 0:
                self.injected()
            Path(f"{self.marker}.failures").write_text(str(self.poison_failures() + 1))
            raise RuntimeError("injected F10: a poison record fails its batch")
        if self.c.get("delta"):
            # Delta's idempotent writes: a batch id it already has for this app id is skipped.
            (
                rows.withColumn("batch", lit(batch_id))
                .write.format("delta")
                .mode("append")
                .option("txnAppId", "share-stream")
                .option("txnVersion", batch_id)
                .save(self.sink)
            )
        else:
            rows.write.mode("overwrite").parquet(f"{self.sink}/batch={batch_id}")
        if failure == "F8":
            second_count = spark.read.parquet(f"{self.sink}/batch={batch_id}").count()
            if first_count != second_count:
                Path(f"{self.sink}.replay-mismatch").write_text(f"batch {batch_id}: {first_count} then {second_count}\n")
        if failure == "F2" and batch_id == failure_batch and once:
            self.injected()
            raise RuntimeError("injected F2: the batch fails after its reader finished")
        if failure == "F5" and batch_id == failure_batch and once:
            self.injected()
            self.driver_kill.arrive(self.marker)  # the sink has batch N, the commit log does not

    def poison_failures(self) -> int:
        f = Path(f"{self.marker}.failures")
        return int(f.read_text()) if f.exists() else 0

    def write_windows(self, df: DataFrame, batch_id: int) -> None:
        """The watermarked query's sink: the windows this batch updated, each with all its keys so far."""
        df.select(col("w.start").cast("string").alias("w"), "ks").write.mode("overwrite").parquet(f"{self.sink}/batch={batch_id}")

    def sink_rows(self) -> DataFrame:
        """One row per record the sink holds, with its key k (and batch, the batch that wrote it)."""
        if self.c.get("delta"):
            return spark.read.format("delta").load(self.sink)
        df = spark.read.parquet(self.sink)
        if self.c.get("watermark"):
            # Each window's last update holds every key the state collected for it.
            return df.groupBy("w").agg(max_by("ks", "batch").alias("ks")).select(explode("ks").alias("k"))
        return df

    def landed(self) -> tuple[int, int]:
        """(rows, distinct keys) in the sink; (0, 0) while a batch is being (re)written under our feet."""
        try:
            df = self.sink_rows()
            return df.count(), df.select("k").distinct().count()
        except Exception:
            return 0, 0

    def last_sink_batch(self) -> int:
        """The highest batch id written to the sink (directories batch=N; a column of the Delta table)."""
        if self.c.get("delta"):
            newest = spark.read.format("delta").load(self.sink).agg({"batch": "max"}).first()
            return int(newest[0]) if newest is not None and newest[0] is not None else -1
        return max((int(d.name.split("=")[1]) for d in Path(self.sink).glob("batch=*")), default=-1)

    def committed_batches(self) -> int:
        checkpoint = self.c["checkpoint"]
        if "://" in checkpoint:  # on a remote store: through Hadoop, as Spark reads it
            jvm = spark._jvm
            assert jvm is not None
            commits_dir = jvm.org.apache.hadoop.fs.Path(checkpoint + "/commits")
            fs = commits_dir.getFileSystem(spark._jsc.hadoopConfiguration())
            if not fs.exists(commits_dir):
                return 0
            return len([f for f in fs.listStatus(commits_dir) if f.getPath().getName().isdigit()])
        commits = Path(checkpoint, "commits")
        return len([f for f in commits.iterdir() if f.name.isdigit()]) if commits.exists() else 0

    def start(self) -> None:
        c = self.c
        reader = (
            spark.readStream.format("kafka-share")
            .option("kafka.bootstrap.servers", c["bootstrap"])
            .option("kafka.share.group.id", c["group"])
            .option("startingOffsets", "earliest")
            .option("kafka.share.exactly.once.strategy", c.get("strategy", "none"))
            .option("kafka.share.parallelism", str(c.get("parallelism", 2)))
        )
        if c["topic"]:
            reader = reader.option("subscribe", c["topic"])
        for k, v in (c.get("options") or {}).items():
            reader = reader.option(k, str(v))
        records = reader.load()
        if c.get("union_rate"):
            # A union with a rate stream: Spark runs batches in which only the rate source moved.
            ticks = (
                spark.readStream.format("rate")
                .option("rowsPerSecond", 5)
                .load()
                .select(
                    lit(None).cast("binary").alias("key"),
                    lit(None).cast("string").alias("topic"),
                    lit(-1).alias("partition"),
                    col("value").alias("offset"),
                    lit(0).alias("deliveryCount"),
                )
            )
            records = (
                records.select("key", "topic", "partition", "offset", "deliveryCount")
                .unionByName(ticks)
                .where(col("topic").isNotNull())
            )
        if c.get("watermark"):
            # Far behind the newest event time: the records were all produced before the query started and
            # none may be late; what matters is that the watermark moves, so Spark runs no-data batches.
            windows = (
                records.withWatermark("timestamp", "1 hour")
                .groupBy(window("timestamp", "1 second").alias("w"))
                .agg(collect_list(col("key").cast("string")).alias("ks"))
            )
            writer = (
                windows.writeStream.outputMode("update")
                .foreachBatch(self.write_windows)
                .option("checkpointLocation", c["checkpoint"])
            )
        elif c.get("sink_format"):
            # Spark's file sink (idempotent per batch id through its metadata log) instead of foreachBatch.
            writer = (
                records.select(
                    col("key").cast("string").alias("k"),
                    "partition",
                    "offset",
                    "deliveryCount",
                    spark_partition_id().alias("task"),
                )
                .writeStream.format(c["sink_format"])
                .option("path", self.sink)
                .option("checkpointLocation", c["checkpoint"])
            )
        else:
            writer = records.writeStream.foreachBatch(self.write_batch).option("checkpointLocation", c["checkpoint"])
        if c.get("trigger") == "available_now":
            self.handle = writer.trigger(availableNow=True).start()
        else:
            self.handle = writer.trigger(processingTime=c.get("trigger_interval", "200 milliseconds")).start()

    def wait_for_progress(self, done: object, within_s: float = 30) -> None:
        """Waits until done(progress of the batches that ran) holds, for at most within_s seconds."""
        until = time.time() + within_s
        while time.time() < until:
            ran = [p for p in self.query.recentProgress if p.get("batchId", -1) >= 0 and "sources" in p]
            if ran and done(ran):  # type: ignore[operator]
                return
            time.sleep(0.5)

    def step(self) -> None:
        """One turn of the loop below: starts the query again if it failed, notes its status, and ends
        it (done) once everything landed, or its until_file exists, or it ran stop_after_batches."""
        c, query = self.c, self.query
        if time.time() >= self.deadline:
            self.done = True
            return
        if (query.exception() is not None or not query.isActive) and c.get("no_restart"):
            self.result["error"] = str(query.exception())
            self.done = True
            return
        if query.exception() is not None or not query.isActive:
            self.restarts += 1  # F2: the query failed; a restart re-runs the failed batch from its offset log
            if c.get("restarts_file"):  # each failure, kept where a later kill cannot take it away
                failed = Path(c["restarts_file"])
                errors = json.loads(failed.read_text()) if failed.exists() else []
                written = failed.with_suffix(".tmp")
                written.write_text(json.dumps([*errors, str(query.exception())]))
                written.replace(failed)  # whole or not at all: a kill may come at any moment
            self.start()
            query = self.query
        progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
        if c.get("status_file") and time.time() - self.status_written >= float(c.get("status_every_s", 1)):
            Path(c["status_file"]).write_text(str(self.landed()[1]))
            self.status_written = time.time()
        if c.get("until_file"):
            self.done = Path(c["until_file"]).exists()
            return
        stop_after = c.get("stop_after_batches")
        if stop_after and len(progress) >= stop_after:
            self.stop_between_batches()  # now, not when the other queries are done too
            self.done = True
            return
        distinct_now = self.landed()[1]
        if distinct_now > self.distinct_seen:
            self.distinct_seen = distinct_now
            self.deadline = min(self.latest_deadline, max(self.deadline, time.time() + LANDING_GRACE_S))
        if distinct_now >= c["expected"]:
            # The batch that landed the last rows reports its progress only after it commits; wait for it.
            self.wait_for_progress(lambda ps: ps[-1]["batchId"] >= self.last_sink_batch())
            if c.get("idle_check_s"):
                # After the last records, one more batch runs and finds nothing (a consumer cannot know
                # without asking); it may wait for its consumers to join the group. Count from its end.
                self.wait_for_progress(lambda ps: ps[-1]["numInputRows"] == 0)
                # Batches that ran leave a file in the checkpoint's commit log. (Progress events are no
                # measure: Spark reports an idle query every 10 s under the next batch's id.)
                before = self.committed_batches()
                time.sleep(float(c["idle_check_s"]))
                self.result["batches_while_idle"] = self.committed_batches() - before
            self.done = True

    def stop_between_batches(self) -> None:
        """Stops between batches, not inside one: a batch interrupted after it pinned its records keeps
        them (they belong to it and it runs again on restart), which is not what a stop test is about."""
        until = time.time() + 60
        while self.query.isActive and self.query.status["isTriggerActive"] and time.time() < until:
            time.sleep(0.05)
        self.query.stop()

    def finish(self) -> dict[str, object]:
        """Stops the query (between batches where asked) and gives its line: what its sink holds."""
        c, query, result = self.c, self.query, self.result
        if c.get("stop_after_batches"):
            self.stop_between_batches()
        progress = list(query.recentProgress)
        if c.get("report_surface"):
            # Where a secret could show: the progress JSON, the plan, and the SQL tab of the UI (its REST API).
            import urllib.request

            ui = spark.sparkContext.uiWebUrl
            app = spark.sparkContext.applicationId
            with urllib.request.urlopen(f"{ui}/api/v1/applications/{app}/sql?details=true&planDescription=true") as r:
                sql_ui = r.read().decode()
            result["surface"] = {
                "progress": json.dumps(progress, default=str),
                "plan": query._jsq.explainInternal(True),
                "sql_ui": sql_ui,
            }
        query.stop()
        rows, distinct = self.landed()
        if c.get("consume_after_stop_ms"):
            # Promise 7: with this JVM (and its pooled consumers) still alive, another member of the group
            # gets what the stopped query did not take, well before the locks (15 s in the tests) expire.
            remaining = c["expected"] - distinct
            started = time.time()
            got = int(
                harness("share-consume", c["bootstrap"], c["group"], c["topic"], str(remaining), str(c["consume_after_stop_ms"]))
            )
            result.update(
                {
                    "remaining": remaining,
                    "consumed_after_stop": got,
                    "seconds_to_consume_after_stop": round(time.time() - started, 1),
                }
            )
        if c.get("report_keys") and rows:
            result["keys"] = [r["k"] for r in self.sink_rows().select("k").collect()]
        per_task = {}
        if rows and not c.get("watermark"):
            per_task = {str(r["task"]): r["count"] for r in self.sink_rows().groupBy("task").count().collect()}
        result.update(
            {
                "app_id": spark.sparkContext.applicationId,
                "rows": rows,
                "distinct": distinct,
                "restarts": self.restarts,
                "rows_per_task": per_task,
                "batch_sizes": [p["numInputRows"] for p in progress if p["numInputRows"] > 0],
                "metrics": progress[-1]["sources"][0]["metrics"] if progress else {},
                "progress": [(p["batchId"], p["numInputRows"], p["timestamp"], p["sources"][0]["metrics"]) for p in progress],
                # Each batch's start and length: how long batches took after a restart (test_recovery.py).
                "batch_times": [
                    (p["batchId"], p["numInputRows"], p["timestamp"], p["durationMs"].get("triggerExecution", 0))
                    for p in progress
                    if "sources" in p
                ],
            }
        )
        return result


def inject_in_background(queries: list[ShareQuery]) -> None:
    """F3, F4r, F6, F7 strike at a moment, not at a batch: a thread waits until every query committed a
    batch of this run, plus inject_after_s, then kills the driver (F4r) or an executor (F3), restarts the
    broker (F6) or pauses the JVM (F7), once for all queries."""
    if failure not in ("F3", "F4r", "F6", "F7") or all(q.marker.exists() for q in queries):
        return
    app_id, jvm_pid = spark.sparkContext.applicationId, spark_jvm_pid()

    # A batch committed by this run, not one a run before it left in the checkpoint.
    before = [q.committed_batches() for q in queries]

    def run() -> None:
        while any(q.committed_batches() <= b for q, b in zip(queries, before)):
            time.sleep(0.2)
        time.sleep(float(config.get("inject_after_s", 0)))
        for q in queries:
            q.injected()
        if failure == "F4r":  # the driver dies at a moment, not at a batch
            kill_driver()
        if failure == "F3":  # SIGKILL one executor JVM of this application (local-cluster mode)
            pids = subprocess.run(
                ["pgrep", "-f", f"CoarseGrainedExecutorBackend.*{app_id}"], capture_output=True, text=True
            ).stdout.split()
            os.kill(int(pids[0]), signal.SIGKILL)
        elif failure == "F6":  # SIGKILL the broker, start it again on the same data and ports
            harness("kill", config["broker_dir"])
            harness("start", config["broker_version"], config["broker_dir"])
        elif failure == "F7":  # a pause longer than the consumers' session and their locks
            os.kill(jvm_pid, signal.SIGSTOP)
            time.sleep(float(config.get("pause_s", 20)))
            os.kill(jvm_pid, signal.SIGCONT)

    threading.Thread(target=run, daemon=True).start()


# While rows keep landing the run is slow, not stuck (a loaded machine, the JVM's first batches): each
# new row grants LANDING_GRACE_S more, up to twice timeout_s. A run that lands nothing for that long ends,
# and its counts then show what is missing.
LANDING_GRACE_S = 60.0
failure = config.get("failure") or "none"
several = config.get("queries")
# What the application does as a whole stays the same for all its queries.
shared = [k for q in several or [] for k in ("failure", "trigger", "delta", "master", "spark_conf", "inject_after_s") if k in q]
assert not shared, f"these keys are the application's, not a query's: {shared}"
query_configs = [{**config, **q} for q in several] if several else [config]
# F4 and F5 kill the driver once every query that was to be struck reached its point.
markers = [c.get("marker") for c in query_configs]
assert failure not in ("F4", "F5") or len(set(markers)) == len(markers), "F4 and F5 strike each query: a marker each"
struck = [c for c in query_configs if c.get("failure") in ("F4", "F5") and not Path(c.get("marker") or "/nonexistent").exists()]
driver_kill = DriverKill(len(struck))
queries = [ShareQuery(c, driver_kill) for c in query_configs]
if config.get("pid_file"):
    Path(config["pid_file"]).write_text(json.dumps({"pid": spark_jvm_pid(), "app_id": spark.sparkContext.applicationId}))
for q in queries:
    q.start()
inject_in_background(queries)
if config.get("trigger") == "available_now":
    assert len(queries) == 1, "Trigger.AvailableNow runs one query"
    only = queries[0]
    only.result["ended_by_itself"] = only.query.awaitTermination(int(config.get("timeout_s", 120)))
    if config.get("stop_spark_when_ended"):
        spark.stop()  # executors go at once: whatever they still hold stays locked with the group
        import pyarrow.parquet as pq

        keys = [
            k for f in Path(only.sink).glob("batch=*/*.parquet") for k in pq.read_table(f, columns=["k"]).column("k").to_pylist()
        ]
        only.result.update({"rows": len(keys), "distinct": len(set(keys)), "restarts": 0})
        print(json.dumps(only.result))
        sys.exit(0)
else:
    while not all(q.done for q in queries):
        for q in queries:
            if not q.done:
                q.step()
        if not all(q.done for q in queries):
            time.sleep(1)
results = [q.finish() for q in queries]
print(json.dumps({"queries": results} if several else results[0]))
spark.stop()
