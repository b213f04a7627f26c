"""A kafka-share query in Spark's real-time mode, into a sink that keeps every row it is given.

Usage: real_time_stream.py '<json config>'. Prints one JSON line at the end.
Config keys: bootstrap, topic, group, strategy, parallelism, checkpoint, sink (a directory), master,
trigger_s (the real-time trigger's duration, 5 s at least), expected (stop once the sink holds that many
distinct keys), timeout_s (stop then at the latest), options (extra source options), checks (a list of
option sets, each laid over the options: a query is started with each, in turn, before the run, and the
error it fails with is reported; only_checks: no run after them), pid_file (receives {"pid": the driver
JVM} at start), kill_after_commit_s (SIGKILL the driver, JVM and this process, that many seconds after
the second batch of this run committed: a crash at a moment inside a real-time batch).

The sink is a foreach writer (real time allows foreach, console, memory and Kafka sinks, not
foreachBatch): each task appends its rows, one line each, to <sink>/<epoch>-<partition>-<uuid>.jsonl,
flushed per row. It keeps every row, a re-run's too, so a test counts what was lost and what came twice,
and tells a batch run again (the same epoch, rows twice) from a source that emits a record in two
batches (two epochs). Each row also carries the time the sink had it, for latency.
"""

import json
import os
import re
import signal
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

import spark_kafka_share

config = json.loads(sys.argv[1])
spark = (
    spark_kafka_share.configure(SparkSession.builder)
    .master(config.get("master", "local[3]"))
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

SINK = config["sink"]


class AppendEveryRow:
    """Appends each row to a file of its own task attempt: nothing is overwritten, a re-run's rows too."""

    def open(self, partition_id: int, epoch_id: int) -> bool:
        os.makedirs(SINK, exist_ok=True)
        path = os.path.join(SINK, f"{epoch_id}-{partition_id}-{uuid.uuid4().hex}.jsonl")
        self.file = open(path, "a", encoding="utf-8")
        self.epoch = epoch_id
        return True

    def process(self, row: Any) -> None:
        line = {"k": row.k, "epoch": self.epoch, "count": row.deliveryCount, "ts": row.ts, "at": time.time()}
        self.file.write(json.dumps(line) + "\n")
        self.file.flush()

    def close(self, error: Any) -> None:
        self.file.close()


options = {
    "kafka.bootstrap.servers": config["bootstrap"],
    "kafka.share.group.id": config["group"],
    "subscribe": config["topic"],
    "kafka.share.exactly.once.strategy": config.get("strategy", "checkpoint-dedup"),
    "kafka.share.parallelism": str(config.get("parallelism", 2)),
    "startingOffsets": "earliest",
    **config.get("options", {}),
}


def start(extra: dict[str, str], checkpoint: str) -> StreamingQuery:
    stream = (
        spark.readStream.format("kafka-share")
        .options(**{**options, **extra})
        .load()
        .selectExpr("CAST(key AS STRING) AS k", "deliveryCount", "CAST(timestamp AS DOUBLE) AS ts")
    )
    return (
        stream.writeStream.outputMode("update")
        .option("checkpointLocation", checkpoint)
        .foreach(AppendEveryRow())
        .trigger(**spark_kafka_share.real_time(f"{config.get('trigger_s', 5)} seconds"))
        .start()
    )


def check(extra: dict[str, str], n: int) -> dict[str, Any]:
    """Starts a query that must fail at start; returns its error's condition and message."""
    error: BaseException | None
    try:
        query = start(extra, f"{config['checkpoint']}-check-{n}")
        query.awaitTermination(60)
        error = query.exception()
        query.stop()
    except Exception as e:
        error = e
    if error is None:
        return {"condition": None, "error": None}
    text = str(error)
    # A query that fails at start says STREAM_FAILED, with the source's error inside its text.
    ours = re.search(r"\[(KAFKA_SHARE_[A-Z0-9_.]+)\]", text)
    condition = ours.group(1) if ours else getattr(error, "getCondition", lambda: None)()
    return {"condition": condition, "error": text[ours.start() if ours else 0 :][:1500]}


def distinct_keys() -> int:
    keys: set[str] = set()
    for name in os.listdir(SINK) if os.path.isdir(SINK) else []:
        with open(os.path.join(SINK, name), encoding="utf-8") as f:
            keys.update(json.loads(line)["k"] for line in f if line.endswith("\n"))
    return len(keys)


checks = [check(extra, n) for n, extra in enumerate(config.get("checks", []))]
if config.get("only_checks"):
    print(json.dumps({"checks": checks}))
    sys.exit(0)

query = start({}, config["checkpoint"])
started = time.time()
if "kill_after_commit_s" in config:

    def kill_inside_a_batch() -> None:
        commits = Path(config["checkpoint"]) / "commits"
        before = set(os.listdir(commits)) if commits.is_dir() else set()
        # After the second batch of this run committed: the first emits little (Python's foreach writer starts).
        while not (commits.is_dir() and len({n for n in os.listdir(commits) if n.isdigit()} - before) >= 2):
            time.sleep(0.05)
        time.sleep(float(config["kill_after_commit_s"]))
        os.kill(spark._jvm.java.lang.ProcessHandle.current().pid(), signal.SIGKILL)  # type: ignore[union-attr]
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=kill_inside_a_batch, daemon=True).start()
while query.isActive and time.time() - started < config.get("timeout_s", 120):
    if distinct_keys() >= config.get("expected", 1 << 62):
        break
    time.sleep(0.5)
error = query.exception()
progress = query.recentProgress
query.stop()
print(
    json.dumps(
        {
            "checks": checks,
            "error": str(error)[:2000] if error else None,
            "batches": len(progress),
            "metrics": progress[-1]["sources"][0].get("metrics", {}) if progress else {},
        }
    )
)
