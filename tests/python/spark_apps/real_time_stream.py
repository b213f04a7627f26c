"""kafka-share queries in Spark's real-time mode, each into a sink that keeps every row it is given.

Usage: real_time_stream.py '<json config>'. Prints one JSON line at the end.
Config keys: bootstrap, topic, master, parallelism, trigger_s (the real-time trigger's duration, 5 s at
least), expected (a query is complete once its sink keeps that many distinct keys; the queries stop together
once all are, settle_s later), timeout_s (every query stops then at the latest), options (extra source
options), queries (a list of {group, strategy, checkpoint, sink, shape, topic}: one real-time query each,
side by side in this application; each needs `parallelism` task slots of the master's, and a stateful one as
many again as spark.sql.shuffle.partitions), checks (a list of option sets, each laid over the options: a
query is started with each, in turn, before the queries, and the error it fails with is written to
checks_file), pid_file (receives {"pid": the driver JVM} at start), kill_after_commit_s (SIGKILL the driver,
JVM and this process, that many seconds after the second batch of this run of every query committed: a crash
at a moment inside a real-time batch; the first batch of a query emits little while Python's foreach worker
starts), kill ("executor": SIGKILL one executor JVM instead, in local-cluster mode, once every slot runs a
task and kill_after_busy_s later, note it in killed_file and go on).

A query's shape (Spark 4.3 has real-time state): "rows" (the default) writes every record's key; "dedup"
writes dropDuplicates on the key (a record once per key: it stops at `expected_keys` distinct keys);
"count" writes groupBy(key % 10).count() in update mode, the group g and its count (it stops once the
counts add up to `expected`).

The sink is a foreach writer (real time allows foreach, console, memory and Kafka sinks, not
foreachBatch): each task appends its rows, one line each, to <sink>/<epoch>-<partition>-<uuid>.jsonl,
flushed per row. It keeps every row, a re-run's too, so a test counts what was lost and what came twice,
and tells a batch run again (the same epoch, rows twice) from a source that emits a record in two
batches (two epochs).
"""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

import spark_kafka_share

sys.path.append(str(Path(__file__).resolve().parent.parent))  # tests/python: the sink's reader is shared with the test
from spark_apps.attempt_files import kept_rows

config = json.loads(sys.argv[1])
spark = (
    spark_kafka_share.configure(SparkSession.builder)
    .master(config.get("master", "local[4]"))
    .config("spark.ui.enabled", "false")
    .config("spark.sql.shuffle.partitions", "2")
    .getOrCreate()
)
spark.sparkContext.setLogLevel(config.get("log_level", "ERROR"))
_log4j = spark._jvm.org.apache.logging.log4j  # type: ignore[union-attr]
_log4j.core.config.Configurator.setLevel("io.github.kafkashare.spark", _log4j.Level.INFO)
if config.get("pid_file"):
    pid = spark._jvm.java.lang.ProcessHandle.current().pid()  # type: ignore[union-attr]
    Path(config["pid_file"]).write_text(json.dumps({"pid": pid}))


class AppendEveryRow:
    """Appends each row to a file of its own task attempt, renamed to ...ok.jsonl when the attempt ends
    without an error (spark_apps/attempt_files.py reads them): nothing is overwritten, a re-run's rows too."""

    def __init__(self, sink: str) -> None:
        self.sink = sink

    def open(self, partition_id: int, epoch_id: int) -> bool:
        os.makedirs(self.sink, exist_ok=True)
        self.path = os.path.join(self.sink, f"{epoch_id}-{partition_id}-{time.time_ns()}-{uuid.uuid4().hex}.jsonl")
        self.file = open(self.path, "a", encoding="utf-8")  # closed in close()
        self.epoch = epoch_id
        return True

    def process(self, row: Any) -> None:
        line = {**row.asDict(), "epoch": self.epoch, "at": time.time()}
        self.file.write(json.dumps(line) + "\n")
        self.file.flush()

    def close(self, error: Any) -> None:
        self.file.close()
        if error is None:
            os.rename(self.path, self.path.removesuffix(".jsonl") + ".ok.jsonl")


def start(query: dict[str, str], extra: dict[str, str]) -> StreamingQuery:
    options = {
        "kafka.bootstrap.servers": config["bootstrap"],
        "kafka.share.group.id": query["group"],
        "subscribe": query.get("topic", config["topic"]),
        "kafka.share.exactly.once.strategy": query.get("strategy", "checkpoint-dedup"),
        "kafka.share.parallelism": str(config.get("parallelism", 2)),
        "startingOffsets": "earliest",
        **config.get("options", {}),
        **extra,
    }
    records = spark.readStream.format("kafka-share").options(**options).load()
    shape = query.get("shape", "rows")
    if shape == "count":
        rows = records.selectExpr("CAST(CAST(key AS STRING) AS INT) % 10 AS g").groupBy("g").count()
    else:
        rows = records.selectExpr("CAST(key AS STRING) AS k", "deliveryCount")
        if shape == "dedup":
            rows = rows.dropDuplicates(["k"])
    return (
        rows.writeStream.outputMode("update")
        .option("checkpointLocation", query["checkpoint"])
        .foreach(AppendEveryRow(query["sink"]))
        .trigger(**spark_kafka_share.real_time(f"{config.get('trigger_s', 5)} seconds"))
        .start()
    )


def check(extra: dict[str, str], n: int) -> dict[str, Any]:
    """Starts a query that must fail at start; returns its error's condition and message."""
    query = config["queries"][0]
    error: BaseException | None
    try:
        started = start({**query, "checkpoint": f"{query['checkpoint']}-check-{n}"}, extra)
        started.awaitTermination(60)
        error = started.exception()
        started.stop()
    except Exception as e:
        error = e
    if error is None:
        return {"condition": None, "error": None}
    text = str(error)
    # A query that fails at start says STREAM_FAILED, with the source's error inside its text.
    ours = re.search(r"\[(KAFKA_SHARE_[A-Z0-9_.]+)\]", text)
    condition = ours.group(1) if ours else getattr(error, "getCondition", lambda: None)()
    return {"condition": condition, "error": text[ours.start() if ours else 0 :][:1500]}


def complete(query: dict[str, str]) -> bool:
    """The query's sink holds what was expected: every key, or (count) the counts of every record."""
    lines = kept_rows(Path(query["sink"]))
    if query.get("shape") == "count":
        counts: dict[int, int] = {}
        for line in lines:
            counts[line["g"]] = max(counts.get(line["g"], 0), line["count"])
        return sum(counts.values()) >= int(config.get("expected", 1 << 62))
    expected = int(config.get("expected_keys" if query.get("shape") == "dedup" else "expected", 1 << 62))
    return len({line["k"] for line in lines}) >= expected


if config.get("checks"):
    checks = [check(extra, n) for n, extra in enumerate(config["checks"])]
    Path(config["checks_file"]).write_text(json.dumps(checks))

running = [(q, start(q, {})) for q in config["queries"]]
started = time.time()
if "kill_after_commit_s" in config:

    def committed(query: dict[str, str]) -> set[str]:
        commits = Path(query["checkpoint"]) / "commits"
        return {n for n in os.listdir(commits) if n.isdigit()} if commits.is_dir() else set()

    def kill_inside_a_batch() -> None:
        before = [committed(q) for q, _ in running]
        while any(len(committed(q) - seen) < 2 for (q, _), seen in zip(running, before, strict=True)):
            time.sleep(0.05)
        time.sleep(float(config["kill_after_commit_s"]))
        if config.get("kill") == "executor":  # one executor JVM of this application (local-cluster mode)
            # Inside a batch: every slot runs a read task then (each executor holds some), not between two.
            busy = 0
            for _ in range(100):
                infos = spark._jsc.sc().statusTracker().getExecutorInfos()
                busy = sum(info.numRunningTasks() for info in infos)
                if busy >= int(config["parallelism"]) * len(config["queries"]):
                    break
                time.sleep(0.1)
            time.sleep(float(config.get("kill_after_busy_s", 0)))  # into the tasks' reading, past their start
            app_id = spark.sparkContext.applicationId
            pgrep = ["pgrep", "-f", f"CoarseGrainedExecutorBackend.*{app_id}"]
            os.kill(int(subprocess.run(pgrep, capture_output=True, text=True).stdout.split()[0]), signal.SIGKILL)
            Path(config["killed_file"]).write_text(json.dumps({"at": time.time(), "running_tasks": busy}))
            return
        os.kill(spark._jvm.java.lang.ProcessHandle.current().pid(), signal.SIGKILL)  # type: ignore[union-attr]
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=kill_inside_a_batch, daemon=True).start()
# Every query runs until all are complete (or one failed, or timeout_s), and settle_s longer: a record given again
# after the last one landed (the next batch's carried rows, a redelivery) is counted too. Then all stop.
while time.time() - started < config.get("timeout_s", 120):
    if any(not query.isActive for _, query in running) or all(complete(q) for q, _ in running):
        break
    time.sleep(0.5)
time.sleep(float(config.get("settle_s", 0)))
results = {}
for q, query in running:
    error = query.exception()
    query.stop()
    results[q["group"]] = {"error": str(error)[:2000] if error else None, "batches": len(query.recentProgress)}
print(json.dumps({"queries": results}))
