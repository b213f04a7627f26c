"""Reads a topic with format("kafka-share") through one of the ways users get the connector.

Usage: install_read.py <how> '<json config>'   how: wheel | packages | connect
  wheel     the installed wheel's spark_kafka_share.configure() puts the jar on the class path
  packages  the jar is already there (spark-submit --packages); this script never names it
  connect   a Spark Connect client (config "remote": "sc://localhost:<port>"); the server has the jar
Config: bootstrap, topic, group, work (a directory), sql (also define a table USING kafka-share and
read it with readStream.table). Options come from the plain-Python builders, as a user writes them.
Prints one JSON line: the rows that landed, the distinct keys, whether the query still runs.
"""

import json
import sys

from pyspark.sql import SparkSession

from spark_kafka_share import KafkaShareOptions

how, config = sys.argv[1], json.loads(sys.argv[2])
builder = SparkSession.builder.appName(f"install-{how}")
if how == "wheel":
    import spark_kafka_share

    spark = spark_kafka_share.configure(builder.master("local[2]")).getOrCreate()
elif how == "packages":
    spark = builder.getOrCreate()
elif how == "connect":
    spark = builder.remote(config["remote"]).getOrCreate()
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
print(json.dumps({"rows": landed.count(), "distinct": landed.select("k").distinct().count(), "active": query.isActive}))
spark.stop()
