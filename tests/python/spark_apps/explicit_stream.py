"""A kafka-share query in explicit acknowledgement mode whose foreachBatch decides per record.

Usage: explicit_stream.py '<json config>'. Prints one JSON line with what happened.

Config keys: bootstrap, topic, group, checkpoint, sink, scenario, timeout_s, options (extra source
options), marker (a file that makes the "fail-once" failure happen once), released_at_stop (fail-once:
the failure's stop RELEASEs the held records, as where the watcher renews), strategy, union_rate (the
stream is unioned with a `rate` stream: Spark runs batches in which only the rate source moved, so
its batch ids run ahead of the batches this source takes part in), queries (a list of dicts, each laid
over the rest of the config: several queries in this one application, each with its own scenario, topic,
group, checkpoint and sink; prints {"queries": [the line of each]}).

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
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

import spark_kafka_share

config = json.loads(sys.argv[1])
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


class ExplicitQuery:
    """One query of this application: its scenario's decisions, its sinks, and whether it is done."""

    def __init__(self, c: dict[str, Any]) -> None:
        self.c = c
        self.scenario = c["scenario"]
        self.sink, self.seen = c["sink"], c["sink"] + "-seen"
        self.marker = Path(c.get("marker") or "/nonexistent")
        self.result: dict[str, object] = {"errors": {}}
        self.restarts = 0
        # What records without a decision get: the sink holds what was processed (accepted).
        self.default_accepts = (c.get("options") or {}).get("kafka.share.acknowledgment.default", "accept") == "accept"
        total = int(c["records"])
        self.expected = {str(k) for k in range(total) if self.scenario != "decisions" or k % 3 != 0}
        if self.scenario == "poison":
            self.expected.discard("7")
        self.query = self.start()
        self.finished = False

    def decide(self, rows: DataFrame) -> DataFrame:
        """The decision column of each scenario (null: no decision)."""
        n = F.col("key").cast("string").cast("int")
        if self.scenario == "decisions":
            return rows.withColumn(
                "decision",
                F.when(n % 3 == 0, "reject")
                .when((n % 3 == 1) & (F.col("deliveryCount") == 1), "release")
                .when(n % 3 == 1, "accept"),
            )
        if self.scenario == "poison":
            return rows.withColumn("decision", F.when(n == 7, "release").otherwise("accept"))
        if self.scenario == "release-by-default":
            return rows.withColumn("decision", F.when(F.col("deliveryCount") >= 2, "accept"))
        return rows.withColumn("decision", F.lit("accept"))

    def process(self, batch: DataFrame, batch_id: int) -> None:
        c, scenario, result = self.c, self.scenario, self.result
        if c.get("union_rate"):
            batch = batch.where(F.col("topic").isNotNull())  # the kafka-share records of the batch
        if scenario == "ack-first":
            spark_kafka_share.acknowledge(
                batch.select("topic", "partition", "offset", F.lit("accept").alias("decision")), batch_id, c["group"]
            )
        rows = batch.select("key", "topic", "partition", "offset", "deliveryCount").cache()
        if rows.isEmpty():
            return
        decided = self.decide(rows)
        decided.select(F.col("key").cast("string").alias("k"), "deliveryCount", "decision").write.mode("overwrite").parquet(
            f"{self.seen}/batch={batch_id}"
        )
        # Undecided records get the default: processed too when it is accept.
        decided.where((F.col("decision").isNull() & F.lit(self.default_accepts)) | (F.col("decision") == "accept")).select(
            F.col("key").cast("string").alias("k"), "partition", "offset", "deliveryCount"
        ).write.mode("overwrite").parquet(f"{self.sink}/batch={batch_id}")
        if scenario == "bad-decisions" and not result["errors"]:
            for name, bad in (
                ("unknown", decided.withColumn("decision", F.lit("maybe"))),
                ("not in batch", decided.withColumn("offset", F.col("offset") + 1_000_000)),
            ):
                try:
                    spark_kafka_share.acknowledge(bad, batch_id, c["group"])
                except Exception as e:
                    result["errors"][name] = str(e)  # type: ignore[index]
        spark_kafka_share.acknowledge(decided.where(F.col("decision").isNotNull()), batch_id, c["group"])
        if scenario == "fail-once" and not self.marker.exists():
            self.marker.touch()
            # Held until the batch commits; the stop the failure brings RELEASEs them, and they come back.
            result["failed_batch_rows"] = rows.count()
            raise RuntimeError("injected: the batch fails after its decisions were given")

    def start(self) -> StreamingQuery:
        c = self.c
        reader = spark.readStream.format("kafka-share").options(
            **spark_kafka_share.KafkaShareOptions(
                bootstrap_servers=c["bootstrap"],
                group_id=c["group"],
                subscribe=[c["topic"]],
                starting_offsets="earliest",
                acknowledgment_mode="explicit",
                parallelism=2,
                strategy=c.get("strategy", "two-phase-commit"),
            ).to_dict()
        )
        for k, v in (c.get("options") or {}).items():
            reader = reader.option(k, str(v))
        records = reader.load()
        if c.get("union_rate"):
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
            records.writeStream.foreachBatch(self.process)
            .option("checkpointLocation", c["checkpoint"])
            .trigger(processingTime="200 milliseconds")
            .start()
        )

    def every_batch_committed(self) -> bool:
        """The checkpoint's commit log has every batch its offset log has."""

        def ids(folder: str) -> set[str]:
            path = Path(self.c["checkpoint"], folder)
            return {f.name for f in path.iterdir() if f.name.isdigit()} if path.exists() else set()

        offsets = ids("offsets")
        return bool(offsets) and offsets <= ids("commits")

    def source_metrics(self) -> dict[str, str]:
        progress = self.query.lastProgress
        return dict(progress["sources"][0]["metrics"]) if progress else {}

    def failed_batch_settled(self) -> bool:
        """The failed batch's records, RELEASEd when the failure stopped the query, are no longer with the
        group: dropped as redeliveries by a batch after the restart (acknowledged with the re-run's
        decisions), or never released (the holder saw the re-run's commit first) and the group's backlog,
        as the broker reports it (Kafka 4.2+), empty. A backlog before this run looked is "" by topic."""
        metrics = self.source_metrics()
        dropped = int(metrics.get("redeliveriesDroppedTotal", "0"))
        empty = metrics.get("backlogRecordsByTopic", "") != "" and metrics.get("backlogRecords") == "0"
        return dropped >= int(str(self.result.get("failed_batch_rows", 0))) or empty

    def done(self) -> bool:
        if not self.expected <= set(keys(self.sink)):
            return False
        # foreachBatch writes the sink before it acknowledges, and two-phase-commit acknowledges at the
        # batch's commit: the sink alone says nothing about what the broker was told.
        if not self.every_batch_committed():
            return False
        if self.scenario == "fail-once":
            # The failed batch wrote the sink before it failed: done only once it ran again and committed,
            # and, where the stop RELEASEs held records (the watcher renews, Kafka 4.2+), once they settled.
            released = bool(self.c.get("released_at_stop", True))
            return self.restarts >= 1 and (not released or self.failed_batch_settled())
        if self.scenario == "poison":
            return int(self.source_metrics().get("recordsRejectedTotal", "0")) > 0
        return True

    def step(self) -> None:
        """Starts the query again if it failed; notes when it is done."""
        if not self.query.isActive:
            self.restarts += 1
            self.query = self.start()
        self.finished = self.done()

    def finish(self) -> dict[str, object]:
        metrics = self.source_metrics()
        self.query.stop()
        seen_rows = spark.read.parquet(self.seen).collect() if Path(self.seen).exists() else []
        self.result.update(
            {
                "landed": keys(self.sink),
                "restarts": self.restarts,
                "metrics": metrics,
                "seen": [[r["k"], r["deliveryCount"], r["decision"]] for r in seen_rows],
            }
        )
        return self.result


def keys(path: str) -> list[str]:
    try:
        return [r["k"] for r in spark.read.parquet(path).select("k").collect()]
    except Exception:
        return []


several = config.get("queries")
queries = [ExplicitQuery({**config, **q}) for q in (several or [{}])]
deadline = time.time() + float(config.get("timeout_s", 150))
while time.time() < deadline and not all(q.finished for q in queries):
    for q in queries:
        if not q.finished:
            q.step()
    time.sleep(1)
time.sleep(1)  # the held records of the last batch are acknowledged right after its commit
results = [q.finish() for q in queries]
print(json.dumps({"queries": results} if several else results[0]))
spark.stop()
