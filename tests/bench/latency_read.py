"""One latency measurement: a query with a processing-time trigger of 0 while records arrive at a steady rate.

Usage: latency_read.py '<json config>'. Config: source ("kafka-share" or "kafka"), bootstrap, topic,
group, parallelism, checkpoint, packages (for Spark's own source), seconds (how long to measure).
For each record, the latency is the time from its Kafka timestamp (set by the producer) to the end of
its batch's foreachBatch, which is when Spark writes the batch's commit. Prints one JSON line with
p50, p99 and the count, over the records of the measured window (the first 10 s after the first rows
are a warm-up).
"""

import json
import sys
import time

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import spark_kafka_share

config = json.loads(sys.argv[1])
builder = (
    SparkSession.builder.master(f"local[{max(2, int(config['parallelism']))}]")
    .config("spark.ui.enabled", "false")
    .config("spark.sql.shuffle.partitions", "2")
)
if config["source"] == "kafka-share":
    builder = spark_kafka_share.configure(builder)
else:
    builder = builder.config("spark.jars.packages", config["packages"])
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
            "kafka.share.parallelism": str(config["parallelism"]),
            "kafka.share.exactly.once.strategy": "checkpoint-dedup",
        }
    )
else:
    reader = reader.option("minPartitions", str(config["parallelism"]))

first_rows: list[float] = []
latencies: list[float] = []


def measure(batch: DataFrame, batch_id: int) -> None:
    stamps = [r[0] for r in batch.select(F.col("timestamp").cast("double")).collect()]
    done = time.time()
    if stamps and not first_rows:
        first_rows.append(done)
    # A warm-up of 10 s after the first rows: the backlog of the start (JVM, the first assignment) is read.
    if first_rows and done - first_rows[0] > 10:
        latencies.extend(done - t for t in stamps)


query = (
    reader.load()
    .writeStream.foreachBatch(measure)
    .option("checkpointLocation", config["checkpoint"])
    .trigger(processingTime="0 seconds")
    .start()
)
deadline = time.time() + 120
while not first_rows and time.time() < deadline:
    time.sleep(0.5)
time.sleep(float(config["seconds"]) + 10)
query.stop()
latencies.sort()


def percentile(p: float) -> float:
    return round(latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000, 1) if latencies else 0.0


print(json.dumps({"records": len(latencies), "p50_ms": percentile(0.50), "p99_ms": percentile(0.99)}))
spark.stop()
