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

from pyspark import TaskContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.functions import col, collect_list, explode, lit, max_by, spark_partition_id, udf, window
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import StringType

import spark_kafka_share

config = json.loads(sys.argv[1])
failure = config.get("failure") or "none"
marker = Path(config.get("marker") or "/nonexistent")
sink = config["sink"]
failure_batch = int(config.get("failure_batch", 1))
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
    jvm_pid = spark._jvm.java.lang.ProcessHandle.current().pid()  # type: ignore[union-attr]
    os.kill(int(jvm_pid), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def injected() -> None:
    """Notes the moment of the injection: the chaos suite measures recovery from it."""
    marker.write_text(str(time.time()))


def spark_jvm_pid() -> int:
    return int(spark._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[union-attr]


def inject_in_background() -> None:
    """F3, F6, F7 strike at a moment, not at a batch: a thread waits for the first committed batch plus
    inject_after_s, then kills an executor (F3), restarts the broker (F6) or pauses the JVM (F7)."""
    if failure not in ("F3", "F4r", "F6", "F7") or marker.exists():
        return
    app_id, jvm_pid = spark.sparkContext.applicationId, spark_jvm_pid()

    # A batch committed by this run, not one a run before it left in the checkpoint.
    before = committed_batches()

    def run() -> None:
        while committed_batches() <= before:
            time.sleep(0.2)
        time.sleep(float(config.get("inject_after_s", 0)))
        injected()
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


def write_batch(df: DataFrame, batch_id: int) -> None:
    once = not marker.exists()
    rows = df.select(
        col("key").cast("string").alias("k"), "partition", "offset", "deliveryCount", spark_partition_id().alias("task")
    )
    if failure == "F1" and batch_id == failure_batch and once:
        injected()
        rows = rows.withColumn("k", fail_once_first_task(batch_id)(col("k")))
    if failure == "F8":
        first_count = rows.count()  # a first action on the batch: the source is read twice
    if failure == "F4" and batch_id == failure_batch and once:
        # A batch longer than the lock (slow_batch_s): its held records' locks are renewed meanwhile (Kafka 4.2+).
        time.sleep(float(config.get("slow_batch_s", 0)))
        injected()
        kill_driver()  # after offset log 1, before the sink has batch 1
    if failure == "F10" and poison_failures() < 3 and rows.filter(col("k") == config.get("poison_key", "7")).count():
        # A record the code cannot process: its batch fails and the query stops; it is restarted
        # (below) and runs the same batch again, three times, until "the fix is deployed".
        if poison_failures() == 0:
            injected()
        Path(f"{marker}.failures").write_text(str(poison_failures() + 1))
        raise RuntimeError("injected F10: a poison record fails its batch")
    if config.get("delta"):
        # Delta's idempotent writes: a batch id it already has for this app id is skipped.
        (
            rows.withColumn("batch", lit(batch_id))
            .write.format("delta")
            .mode("append")
            .option("txnAppId", "share-stream")
            .option("txnVersion", batch_id)
            .save(sink)
        )
    else:
        rows.write.mode("overwrite").parquet(f"{sink}/batch={batch_id}")
    if failure == "F8":
        second_count = spark.read.parquet(f"{sink}/batch={batch_id}").count()
        if first_count != second_count:
            Path(f"{sink}.replay-mismatch").write_text(f"batch {batch_id}: {first_count} then {second_count}\n")
    if failure == "F2" and batch_id == failure_batch and once:
        injected()
        raise RuntimeError("injected F2: the batch fails after its reader finished")
    if failure == "F5" and batch_id == failure_batch and once:
        injected()
        kill_driver()  # the sink has batch 1, the commit log does not


def poison_failures() -> int:
    f = Path(f"{marker}.failures")
    return int(f.read_text()) if f.exists() else 0


def write_windows(df: DataFrame, batch_id: int) -> None:
    """The watermarked query's sink: the windows this batch updated, each with all its keys so far."""
    df.select(col("w.start").cast("string").alias("w"), "ks").write.mode("overwrite").parquet(f"{sink}/batch={batch_id}")


def sink_rows() -> DataFrame:
    """One row per record the sink holds, with its key k (and batch, the batch that wrote it)."""
    if config.get("delta"):
        return spark.read.format("delta").load(sink)
    df = spark.read.parquet(sink)
    if config.get("watermark"):
        # Each window's last update holds every key the state collected for it.
        return df.groupBy("w").agg(max_by("ks", "batch").alias("ks")).select(explode("ks").alias("k"))
    return df


def landed() -> tuple[int, int]:
    """(rows, distinct keys) in the sink; (0, 0) while a batch is being (re)written under our feet."""
    try:
        df = sink_rows()
        return df.count(), df.select("k").distinct().count()
    except Exception:
        return 0, 0


def last_sink_batch() -> int:
    """The highest batch id written to the sink (directories batch=N; a column of the Delta table)."""
    if config.get("delta"):
        newest = spark.read.format("delta").load(sink).agg({"batch": "max"}).first()
        return int(newest[0]) if newest is not None and newest[0] is not None else -1
    return max((int(d.name.split("=")[1]) for d in Path(sink).glob("batch=*")), default=-1)


def committed_batches() -> int:
    if "://" in config["checkpoint"]:  # on a remote store: through Hadoop, as Spark reads it
        jvm = spark._jvm
        assert jvm is not None
        commits_dir = jvm.org.apache.hadoop.fs.Path(config["checkpoint"] + "/commits")
        fs = commits_dir.getFileSystem(spark._jsc.hadoopConfiguration())
        if not fs.exists(commits_dir):
            return 0
        return len([f for f in fs.listStatus(commits_dir) if f.getPath().getName().isdigit()])
    commits = Path(config["checkpoint"], "commits")
    return len([f for f in commits.iterdir() if f.name.isdigit()]) if commits.exists() else 0


def start_query() -> StreamingQuery:
    reader = (
        spark.readStream.format("kafka-share")
        .option("kafka.bootstrap.servers", config["bootstrap"])
        .option("kafka.share.group.id", config["group"])
        .option("startingOffsets", "earliest")
        .option("kafka.share.exactly.once.strategy", config.get("strategy", "none"))
        .option("kafka.share.parallelism", str(config.get("parallelism", 2)))
    )
    if config["topic"]:
        reader = reader.option("subscribe", config["topic"])
    for k, v in (config.get("options") or {}).items():
        reader = reader.option(k, str(v))
    records = reader.load()
    if config.get("union_rate"):
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
    if config.get("watermark"):
        # Far behind the newest event time: the records were all produced before the query started and
        # none may be late; what matters is that the watermark moves, so Spark runs no-data batches.
        windows = (
            records.withWatermark("timestamp", "1 hour")
            .groupBy(window("timestamp", "1 second").alias("w"))
            .agg(collect_list(col("key").cast("string")).alias("ks"))
        )
        writer = (
            windows.writeStream.outputMode("update")
            .foreachBatch(write_windows)
            .option("checkpointLocation", config["checkpoint"])
        )
    elif config.get("sink_format"):
        # Spark's file sink (idempotent per batch id through its metadata log) instead of foreachBatch.
        writer = (
            records.select(
                col("key").cast("string").alias("k"), "partition", "offset", "deliveryCount", spark_partition_id().alias("task")
            )
            .writeStream.format(config["sink_format"])
            .option("path", sink)
            .option("checkpointLocation", config["checkpoint"])
        )
    else:
        writer = records.writeStream.foreachBatch(write_batch).option("checkpointLocation", config["checkpoint"])
    if config.get("trigger") == "available_now":
        return writer.trigger(availableNow=True).start()
    return writer.trigger(processingTime=config.get("trigger_interval", "200 milliseconds")).start()


def wait_for_progress(done: object, within_s: float = 30) -> None:
    """Waits until done(progress of the batches that ran) holds, for at most within_s seconds."""
    until = time.time() + within_s
    while time.time() < until:
        ran = [p for p in query.recentProgress if p.get("batchId", -1) >= 0 and "sources" in p]
        if ran and done(ran):  # type: ignore[operator]
            return
        time.sleep(0.5)


deadline = time.time() + float(config.get("timeout_s", 120))
# While rows keep landing the run is slow, not stuck (a loaded machine, the JVM's first batches): each
# new row grants LANDING_GRACE_S more, up to twice timeout_s. A run that lands nothing for that long ends,
# and its counts then show what is missing.
LANDING_GRACE_S = 60.0
latest_deadline = time.time() + 2 * float(config.get("timeout_s", 120))
distinct_seen = 0
restarts = 0
if config.get("pid_file"):
    Path(config["pid_file"]).write_text(json.dumps({"pid": spark_jvm_pid(), "app_id": spark.sparkContext.applicationId}))
query = start_query()
status_written = 0.0
inject_in_background()
result: dict[str, object] = {}
if config.get("trigger") == "available_now":
    result["ended_by_itself"] = query.awaitTermination(int(config.get("timeout_s", 120)))
    if config.get("stop_spark_when_ended"):
        spark.stop()  # executors go at once: whatever they still hold stays locked with the group
        import pyarrow.parquet as pq

        keys = [k for f in Path(sink).glob("batch=*/*.parquet") for k in pq.read_table(f, columns=["k"]).column("k").to_pylist()]
        result.update({"rows": len(keys), "distinct": len(set(keys)), "restarts": 0})
        print(json.dumps(result))
        sys.exit(0)
while config.get("trigger") != "available_now" and time.time() < deadline:
    if (query.exception() is not None or not query.isActive) and config.get("no_restart"):
        result["error"] = str(query.exception())
        break
    if query.exception() is not None or not query.isActive:
        restarts += 1  # F2: the query failed; a restart re-runs the failed batch from its offset log
        if config.get("restarts_file"):  # each failure, kept where a later kill cannot take it away
            failed = Path(config["restarts_file"])
            errors = json.loads(failed.read_text()) if failed.exists() else []
            written = failed.with_suffix(".tmp")
            written.write_text(json.dumps([*errors, str(query.exception())]))
            written.replace(failed)  # whole or not at all: a kill may come at any moment
        query = start_query()
    progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    if config.get("status_file") and time.time() - status_written >= float(config.get("status_every_s", 1)):
        Path(config["status_file"]).write_text(str(landed()[1]))
        status_written = time.time()
    if config.get("until_file"):
        if Path(config["until_file"]).exists():
            break
        time.sleep(1)
        continue
    stop_after = config.get("stop_after_batches")
    if stop_after and len(progress) >= stop_after:
        break
    distinct_now = landed()[1]
    if distinct_now > distinct_seen:
        distinct_seen = distinct_now
        deadline = min(latest_deadline, max(deadline, time.time() + LANDING_GRACE_S))
    if distinct_now >= config["expected"]:
        # The batch that landed the last rows reports its progress only after it commits; wait for it.
        wait_for_progress(lambda ps: ps[-1]["batchId"] >= last_sink_batch())
        if config.get("idle_check_s"):
            # After the last records, one more batch runs and finds nothing (a consumer cannot know
            # without asking); it may wait for its consumers to join the group. Count from its end.
            wait_for_progress(lambda ps: ps[-1]["numInputRows"] == 0)
            # Batches that ran leave a file in the checkpoint's commit log. (Progress events are no
            # measure: Spark reports an idle query every 10 s under the next batch's id.)
            before = committed_batches()
            time.sleep(float(config["idle_check_s"]))
            result["batches_while_idle"] = committed_batches() - before
        break
    time.sleep(1)
if config.get("stop_after_batches"):
    # Stop between batches, not inside one: a batch interrupted after it pinned its records keeps them
    # (they belong to it and it runs again on restart), which is not what a stop test is about.
    until = time.time() + 60
    while query.status["isTriggerActive"] and time.time() < until:
        time.sleep(0.05)
progress = list(query.recentProgress)
if config.get("report_surface"):
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
rows, distinct = landed()
if config.get("consume_after_stop_ms"):
    # Promise 7: with this JVM (and its pooled consumers) still alive, another member of the group
    # gets what the stopped query did not take, well before the locks (15 s in the tests) expire.
    remaining = config["expected"] - distinct
    started = time.time()
    got = int(
        harness(
            "share-consume",
            config["bootstrap"],
            config["group"],
            config["topic"],
            str(remaining),
            str(config["consume_after_stop_ms"]),
        )
    )
    result.update(
        {"remaining": remaining, "consumed_after_stop": got, "seconds_to_consume_after_stop": round(time.time() - started, 1)}
    )
if config.get("report_keys") and rows:
    result["keys"] = [r["k"] for r in sink_rows().select("k").collect()]
per_task = {}
if rows and not config.get("watermark"):
    per_task = {str(r["task"]): r["count"] for r in sink_rows().groupBy("task").count().collect()}
result.update(
    {
        "app_id": spark.sparkContext.applicationId,
        "rows": rows,
        "distinct": distinct,
        "restarts": restarts,
        "rows_per_task": per_task,
        "batch_sizes": [p["numInputRows"] for p in progress if p["numInputRows"] > 0],
        "metrics": progress[-1]["sources"][0]["metrics"] if progress else {},
        "progress": [(p["batchId"], p["numInputRows"], p["timestamp"], p["sources"][0]["metrics"]) for p in progress],
    }
)
print(json.dumps(result))
spark.stop()
