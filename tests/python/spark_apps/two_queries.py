"""Two kafka-share queries in one Spark application, one share group, each subscribed to its own topic.

Usage: two_queries.py '<json config>'. Config keys: bootstrap, group, topics (two names), strategy,
work (a directory for checkpoints and sinks), expected (records per topic), timeout_s, options.
Prints one JSON line: per query, the rows its sink holds, its distinct keys and the topics they came from.
"""

import json
import sys
import time
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.functions import col

import spark_kafka_share

config = json.loads(sys.argv[1])
work = config["work"]
spark = (
    spark_kafka_share.configure(SparkSession.builder)
    .master("local[2,4]")
    .config("spark.sql.shuffle.partitions", "2")
    .config("spark.ui.enabled", "false")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")


def sink_of(topic: str) -> str:
    return f"{work}/sink-{topic}"


def start(topic: str):  # type: ignore[no-untyped-def]
    def write(df: DataFrame, batch_id: int) -> None:
        df.select(col("key").cast("string").alias("k"), "topic", "offset").write.mode("overwrite").parquet(
            f"{sink_of(topic)}/batch={batch_id}"
        )

    reader = (
        spark.readStream.format("kafka-share")
        .option("kafka.bootstrap.servers", config["bootstrap"])
        .option("kafka.share.group.id", config["group"])
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("kafka.share.exactly.once.strategy", config.get("strategy", "checkpoint-dedup"))
        .option("kafka.share.parallelism", "2")
    )
    for k, v in (config.get("options") or {}).items():
        reader = reader.option(k, str(v))
    return (
        reader.load()
        .writeStream.foreachBatch(write)
        .option("checkpointLocation", f"{work}/checkpoint-{topic}")
        .trigger(processingTime="200 milliseconds")
        .start()
    )


def landed(topic: str) -> dict[str, Any]:
    try:
        df = spark.read.parquet(sink_of(topic))
        return {
            "rows": df.count(),
            "distinct": df.select("k").distinct().count(),
            "topics": sorted(r["topic"] for r in df.select("topic").distinct().collect()),
        }
    except Exception:
        return {"rows": 0, "distinct": 0, "topics": []}


queries = {t: start(t) for t in config["topics"]}
deadline = time.time() + float(config.get("timeout_s", 150))
while time.time() < deadline:
    if any(not q.isActive for q in queries.values()):
        break
    if all(int(landed(t)["distinct"]) >= config["expected"] for t in queries):
        time.sleep(3)  # a record of the other query's topic landing late would show in these seconds
        break
    time.sleep(1)
result = {t: {**landed(t), "error": str(q.exception()) if q.exception() else None} for t, q in queries.items()}
for q in queries.values():
    q.stop()
print(json.dumps(result))
spark.stop()
