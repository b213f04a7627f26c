"""A kafka-share query in explicit acknowledgement mode whose foreachBatch decides per record.

Usage: explicit_stream.py '<json config>'. Prints one JSON line with what happened.

Config keys: bootstrap, topic, group, checkpoint, sink, scenario, timeout_s, options (extra source
options), marker (a file that makes the "fail-once" failure happen once), released_at_stop (fail-once:
the failure's stop RELEASEs the held records, as where the watcher renews), strategy, union_rate (the
stream is unioned with a `rate` stream: Spark runs batches in which only the rate source moved, so
its batch ids run ahead of the batches this source takes part in).

Records carry keys "0".."N-1". The sink gets the records foreachBatch ACCEPTs (as a user would write
what it processed); <sink>-seen gets every row the query was given, with its delivery count.
Scenarios:
  decisions  key % 3 == 0: reject; == 1: release on the first delivery, accept on the next;
             == 2: no decision (the default applies). Ends when every accepted key landed.
  poison     key "7" fails every time (released); every other key is accepted. Ends when every
             other key landed and the source reports a rejected record.
  fail-once  accept everything, but the first batch with records fails after deciding; the query is
             started again. Ends when every key landed and the failed batch's records, RELEASEd at
             the stop, are no longer with the group (failed_batch_settled).
  bad-decisions  the first batch with records tries an unknown decision and a record of no batch;
             reports both errors, then accepts everything.
  release-by-default  decides nothing on a first delivery (kafka.share.acknowledgment.default=release
             must bring the record back), accepts on the next. Ends when every key landed.
  ack-first  the acknowledgement is the first action on the batch (nothing else read it before);
             accepts everything.
"""

import json
import sys
import time
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

import spark_kafka_share

config = json.loads(sys.argv[1])
scenario = config["scenario"]
sink, seen = config["sink"], config["sink"] + "-seen"
marker = Path(config.get("marker") or "/nonexistent")
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
result: dict[str, object] = {"errors": {}}


def decide(rows: DataFrame) -> DataFrame:
    """The decision column of each scenario (null: no decision)."""
    n = F.col("key").cast("string").cast("int")
    if scenario == "decisions":
        return rows.withColumn(
            "decision",
            F.when(n % 3 == 0, "reject").when((n % 3 == 1) & (F.col("deliveryCount") == 1), "release").when(n % 3 == 1, "accept"),
        )
    if scenario == "poison":
        return rows.withColumn("decision", F.when(n == 7, "release").otherwise("accept"))
    if scenario == "release-by-default":
        return rows.withColumn("decision", F.when(F.col("deliveryCount") >= 2, "accept"))
    return rows.withColumn("decision", F.lit("accept"))


# What records without a decision get: the sink holds what was processed (accepted).
default_accepts = (config.get("options") or {}).get("kafka.share.acknowledgment.default", "accept") == "accept"


def process(batch: DataFrame, batch_id: int) -> None:
    if config.get("union_rate"):
        batch = batch.where(F.col("topic").isNotNull())  # the kafka-share records of the batch
    if scenario == "ack-first":
        spark_kafka_share.acknowledge(
            batch.select("topic", "partition", "offset", F.lit("accept").alias("decision")), batch_id, config["group"]
        )
    rows = batch.select("key", "topic", "partition", "offset", "deliveryCount").cache()
    if rows.isEmpty():
        return
    decided = decide(rows)
    decided.select(F.col("key").cast("string").alias("k"), "deliveryCount", "decision").write.mode("overwrite").parquet(
        f"{seen}/batch={batch_id}"
    )
    # Undecided records get the default: processed too when it is accept.
    decided.where((F.col("decision").isNull() & F.lit(default_accepts)) | (F.col("decision") == "accept")).select(
        F.col("key").cast("string").alias("k"), "partition", "offset", "deliveryCount"
    ).write.mode("overwrite").parquet(f"{sink}/batch={batch_id}")
    if scenario == "bad-decisions" and not result["errors"]:
        for name, bad in (
            ("unknown", decided.withColumn("decision", F.lit("maybe"))),
            ("not in batch", decided.withColumn("offset", F.col("offset") + 1_000_000)),
        ):
            try:
                spark_kafka_share.acknowledge(bad, batch_id, config["group"])
            except Exception as e:
                result["errors"][name] = str(e)  # type: ignore[index]
    spark_kafka_share.acknowledge(decided.where(F.col("decision").isNotNull()), batch_id, config["group"])
    if scenario == "fail-once" and not marker.exists():
        marker.touch()
        # Held until the batch commits; the stop the failure brings RELEASEs them, and they come back.
        result["failed_batch_rows"] = rows.count()
        raise RuntimeError("injected: the batch fails after its decisions were given")


def start_query() -> StreamingQuery:
    reader = spark.readStream.format("kafka-share").options(
        **spark_kafka_share.KafkaShareOptions(
            bootstrap_servers=config["bootstrap"],
            group_id=config["group"],
            subscribe=[config["topic"]],
            starting_offsets="earliest",
            acknowledgment_mode="explicit",
            parallelism=2,
            strategy=config.get("strategy", "two-phase-commit"),
        ).to_dict()
    )
    for k, v in (config.get("options") or {}).items():
        reader = reader.option(k, str(v))
    records = reader.load()
    if config.get("union_rate"):
        columns = ["key", "topic", "partition", "offset", "deliveryCount"]
        ticks = (
            spark.readStream.format("rate")
            .option("rowsPerSecond", 2)
            .load()
            .select(
                F.lit(None).cast("binary").alias("key"),
                F.lit(None).cast("string").alias("topic"),
                F.lit(-1).alias("partition"),
                F.col("value").alias("offset"),
                F.lit(0).alias("deliveryCount"),
            )
        )
        records = records.select(*columns).unionByName(ticks)
    return (
        records.writeStream.foreachBatch(process)
        .option("checkpointLocation", config["checkpoint"])
        .trigger(processingTime="200 milliseconds")
        .start()
    )


def keys(path: str) -> list[str]:
    try:
        return [r["k"] for r in spark.read.parquet(path).select("k").collect()]
    except Exception:
        return []


def every_batch_committed() -> bool:
    """The checkpoint's commit log has every batch its offset log has."""

    def ids(folder: str) -> set[str]:
        path = Path(config["checkpoint"], folder)
        return {f.name for f in path.iterdir() if f.name.isdigit()} if path.exists() else set()

    offsets = ids("offsets")
    return bool(offsets) and offsets <= ids("commits")


def source_metrics() -> dict[str, str]:
    progress = query.lastProgress
    return dict(progress["sources"][0]["metrics"]) if progress else {}


def failed_batch_settled() -> bool:
    """The failed batch's records, RELEASEd when the failure stopped the query, are no longer with the
    group: dropped as redeliveries by a batch after the restart (acknowledged with the re-run's
    decisions), or never released (the holder saw the re-run's commit first) and the group's backlog,
    as the broker reports it (Kafka 4.2+), empty. A backlog before this run looked is "" by topic."""
    metrics = source_metrics()
    dropped = int(metrics.get("redeliveriesDroppedTotal", "0"))
    empty = metrics.get("backlogRecordsByTopic", "") != "" and metrics.get("backlogRecords") == "0"
    return dropped >= int(str(result.get("failed_batch_rows", 0))) or empty


def done(expected: set[str], landed: list[str]) -> bool:
    if not expected <= set(landed):
        return False
    # foreachBatch writes the sink before it acknowledges, and two-phase-commit acknowledges at the
    # batch's commit: the sink alone says nothing about what the broker was told.
    if not every_batch_committed():
        return False
    if scenario == "fail-once":
        # The failed batch wrote the sink before it failed: done only once it ran again and committed,
        # and, where the stop RELEASEs held records (the watcher renews, Kafka 4.2+), once they settled.
        released = bool(config.get("released_at_stop", True))
        return restarts >= 1 and (not released or failed_batch_settled())
    if scenario == "poison":
        progress = query.lastProgress
        return progress is not None and int(progress["sources"][0]["metrics"].get("recordsRejectedTotal", "0")) > 0
    return True


total = int(config["records"])
expected = {str(k) for k in range(total) if scenario != "decisions" or k % 3 != 0}
if scenario == "poison":
    expected.discard("7")
query = start_query()
restarts = 0
deadline = time.time() + float(config.get("timeout_s", 150))
while time.time() < deadline and not done(expected, keys(sink)):
    if not query.isActive:
        restarts += 1
        query = start_query()
    time.sleep(1)
time.sleep(1)  # the held records of the last batch are acknowledged right after its commit
metrics = query.lastProgress["sources"][0]["metrics"] if query.lastProgress else {}
query.stop()

landed = keys(sink)
seen_rows = spark.read.parquet(seen).collect() if Path(seen).exists() else []
result.update(
    {
        "landed": landed,
        "restarts": restarts,
        "metrics": metrics,
        "seen": [[r["k"], r["deliveryCount"], r["decision"]] for r in seen_rows],
    }
)
print(json.dumps(result))
spark.stop()
