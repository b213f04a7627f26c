"""Reads a topic with format("kafka-share") through one of the ways users get the connector.

Usage: install_read.py <how> '<json config>'   how: wheel | submitted | connect
  wheel      the installed wheel's spark_kafka_share.configure() puts the jar on the class path
  submitted  spark-submit put the jar there (--packages, or --jars of a copy); the script never names it,
             and calls configure() as the README says: config "configure" is "after" (the session started
             first, then configure(SparkSession.builder)) or "before" (configure(builder).getOrCreate())
  connect    a Spark Connect client (config "remote": "sc://localhost:<port>"); the server has the jar, and
             the client calls configure() once connected
Config: bootstrap, topic, group, work (a directory), sql (also define a table USING kafka-share and
read it with readStream.table). Options come from the plain-Python builders, as a user writes them.
Prints one JSON line: the rows that landed, the distinct keys, whether the query still runs, the
session's spark.jars, and how the source's errors reach this client (their condition, SQLSTATE and
Python class).
"""

import json
import sys
import tempfile
from typing import Any

from pyspark.sql import SparkSession

import spark_kafka_share
from spark_kafka_share import KafkaShareOptions

how, config = sys.argv[1], json.loads(sys.argv[2])
builder = SparkSession.builder.appName(f"install-{how}")
if how == "wheel":
    spark = spark_kafka_share.configure(builder.master("local[2]")).getOrCreate()
elif how == "submitted" and config["configure"] == "after":
    spark = builder.getOrCreate()
    spark = spark_kafka_share.configure(SparkSession.builder).getOrCreate()
elif how == "submitted" and config["configure"] == "before":
    spark = spark_kafka_share.configure(builder).getOrCreate()
elif how == "connect":
    spark = builder.remote(config["remote"]).getOrCreate()
    spark_kafka_share.configure(SparkSession.builder)  # asks the server; the client's builder has no URL now
else:
    raise SystemExit(f"unknown way to get the connector: {how}")

options = KafkaShareOptions(
    bootstrap_servers=config["bootstrap"],
    group_id=config["group"],
    subscribe=[config["topic"]],
    strategy="checkpoint-dedup",
    parallelism=2,
    starting_offsets="earliest",
)
if config.get("sql"):
    # SQL users: a table whose provider is kafka-share, read as a stream. OPTIONS are the same keys.
    settings = ", ".join(f"'{k}' '{v}'" for k, v in sorted(options.to_dict().items()))
    spark.sql(f"CREATE TABLE {config['sql']} USING `kafka-share` OPTIONS ({settings})")
    stream = spark.readStream.table(config["sql"])
else:
    stream = spark.readStream.format("kafka-share").options(**options.to_dict()).load()

sink = f"{config['work']}/sink"
query = (
    stream.selectExpr("CAST(key AS STRING) AS k", "partition", "offset")
    .writeStream.format("parquet")
    .option("path", sink)
    .option("checkpointLocation", f"{config['work']}/checkpoint")
    .trigger(availableNow=True)
    .start()
)
query.awaitTermination(240)
landed = spark.read.parquet(sink)
result: dict[str, Any] = {
    "rows": landed.count(),
    "distinct": landed.select("k").distinct().count(),
    "active": query.isActive,
    "jars": spark.conf.get("spark.jars", ""),
}


def error_of(options: dict[str, str]) -> dict[str, Any]:
    """Starts a query with `options` (Spark Connect analyses only when a query starts) and reports its error:
    raised by start(), or, for a query the source stopped while running, by awaitTermination()."""
    try:
        failing = (
            spark.readStream.format("kafka-share")
            .options(**options)
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", tempfile.mkdtemp())
            .start()
        )
        failing.awaitTermination(120)
        return {"type": None, "condition": None, "sqlState": None, "message": str(failing.exception())}
    except Exception as e:  # the error as this client sees it is what the test checks
        return {"type": type(e).__name__, "condition": e.getCondition(), "sqlState": e.getSqlState(), "message": str(e)}  # type: ignore[attr-defined]


if how in ("wheel", "connect"):  # classic Spark and Spark Connect
    good = {"kafka.bootstrap.servers": config["bootstrap"], "kafka.share.group.id": config["group"], "subscribe": config["topic"]}
    result["errors"] = {
        # Wrong options fail the query's start, with the source's condition.
        "missing": error_of({"subscribe": config["topic"]}),
        "misspelt": error_of({**good, "kafka.share.exactly_once.strategy": "checkpoint-dedup"}),
        # The cluster is checked when the query runs: the query stops with the condition in its message.
        "missing_topic": error_of({**good, "subscribe": f"{config['topic']}-absent"}),
    }
print(json.dumps(result))
spark.stop()
