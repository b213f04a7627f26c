"""One latency measurement, clocked at the sink: a query writes each record to a Kafka topic, in real time or micro-batch.

Usage: latency_sink_read.py '<json config>'. Config: source ("kafka-share" or "kafka"), trigger ("real-time" or
"micro-batch"), bootstrap, topic, out_topic, group, parallelism, checkpoint, packages (spark-sql-kafka-0-10:
Spark's Kafka sink, and Spark's own source), seconds (how long to measure after a 10 s warm-up); for
`make bench-latency-profile`: driver_java_options (a log configuration) and profile_file (receives every
measured record's send and write times and the progress of every batch).

Every contender is clocked the same way: a record's latency is from its Kafka timestamp (the producer's
send) to the timestamp of the record Spark's Kafka sink writes for it (its producer's send, in the same
JVM clock of this machine). The sink writes the input's timestamp as the value, so the two are read back
together from the output topic after the query stopped. Spark's Kafka sink writes each row as it comes, in
real time as in micro-batch. Prints one JSON line with p50, p99 and the count of the measured records.
"""

import json
import sys
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import spark_kafka_share

config = json.loads(sys.argv[1])
parallelism = int(config["parallelism"])
builder = (
    SparkSession.builder.master(f"local[{max(2, parallelism)}]")
    .config("spark.ui.enabled", "false")
    .config("spark.sql.shuffle.partitions", "2")
    .config("spark.jars.packages", config["packages"])
)
if config.get("driver_java_options"):
    builder = builder.config("spark.driver.extraJavaOptions", config["driver_java_options"])
if config["source"] == "kafka-share":
    builder = spark_kafka_share.configure(builder)
spark = builder.getOrCreate()
spark.sparkContext.setLogLevel("ERROR")

reader = (
    spark.readStream.format(config["source"])
    .option("kafka.bootstrap.servers", config["bootstrap"])
    .option("subscribe", config["topic"])
    .option("startingOffsets", "latest")
)
if config["source"] == "kafka-share":
    reader = reader.options(
        **{
            "kafka.share.group.id": config["group"],
            "kafka.share.parallelism": str(parallelism),
            "kafka.share.exactly.once.strategy": "checkpoint-dedup",
            **config.get("share_options", {}),
        }
    )
elif config["trigger"] == "micro-batch":
    reader = reader.option("minPartitions", str(parallelism))  # real time reads one task per partition

trigger = spark_kafka_share.real_time("5 seconds") if config["trigger"] == "real-time" else {"processingTime": "0 seconds"}
query = (
    reader.load()
    .select(F.col("timestamp").cast("double").cast("string").alias("value"))
    .writeStream.format("kafka")
    .outputMode("update")
    .option("kafka.bootstrap.servers", config["bootstrap"])
    .option("topic", config["out_topic"])
    .option("checkpointLocation", config["checkpoint"])
    .trigger(**trigger)
    .start()
)
deadline = time.time() + 120  # the first rows: after the JVM's start and the group's first assignment
while time.time() < deadline and not any(p["numInputRows"] > 0 for p in query.recentProgress):
    time.sleep(0.5)
time.sleep(10 + float(config["seconds"]))
progress = query.recentProgress
query.stop()
written = (
    spark.read.format("kafka")
    .option("kafka.bootstrap.servers", config["bootstrap"])
    .option("subscribe", config["out_topic"])
    .option("startingOffsets", "earliest")
    .load()
    .select(F.col("value").cast("string").cast("double").alias("sent"), F.col("timestamp").cast("double").alias("written"))
    .collect()
)
first = min((r.written for r in written), default=0.0)
# The 10 s after the first rows are a warm-up: the JVM's first batches, the group's first assignment.
latencies = sorted(r.written - r.sent for r in written if r.written - first > 10)


def percentile(p: float) -> float:
    return round(latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000, 1) if latencies else 0.0


if config.get("profile_file"):
    with open(config["profile_file"], "w", encoding="utf-8") as f:
        measured = [(r.sent, r.written) for r in written if r.written - first > 10]
        json.dump(
            {"records": measured, "batches": [{"timestamp": p["timestamp"], "durationMs": p["durationMs"]} for p in progress]}, f
        )
# p99 per second of the measured window, by when each record was sent: where in the run the tail comes from.
by_second: dict[int, list[float]] = {}
for r in written:
    if r.written - first > 10:
        by_second.setdefault(int(r.sent - first - 10), []).append(r.written - r.sent)
per_second = [
    [second, round(sorted(v)[min(len(v) - 1, int(0.99 * len(v)))] * 1000, 1)]
    for second, v in sorted(by_second.items())
    if second >= 0
]
result = {"records": len(latencies), "p50_ms": percentile(0.50), "p99_ms": percentile(0.99), "p99_by_second": per_second}
print(json.dumps(result))
spark.stop()
