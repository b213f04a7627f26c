"""One measured read for the benchmark: a streaming query into the noop sink until `records` arrived.

Usage: spark_read.py '<json config>'. Prints one JSON line: records read and the seconds they took.
Config: source ("kafka-share" or "kafka"), bootstrap, topic, group, records, parallelism, strategy,
master, packages (Maven coordinates for spark.jars.packages, for Spark's own Kafka source), work_ms
(blocking work per record, in a Python UDF), driver_java_options (a profiler, for example).

The clock runs from the end of the first batch that read records to the end of the batch that read
the last one: both sources then count reading, not JVM start, Ivy resolution or a share consumer's
first assignment (which comes with a heartbeat, seconds after it joins). The first batch is a warm-up.
"""

import json
import sys
import time
from datetime import datetime

from pyspark.sql import SparkSession

import spark_kafka_share

config = json.loads(sys.argv[1])
builder = SparkSession.builder.master(config.get("master", "local[2]")).config("spark.ui.enabled", "false") \
    .config("spark.sql.shuffle.partitions", "2").config("spark.sql.streaming.numRecentProgressUpdates", "100000")
if config.get("driver_java_options"):  # a profiler, for example (docs/performance.md)
    builder = builder.config("spark.driver.extraJavaOptions", config["driver_java_options"])
if config["source"] == "kafka-share":
    builder = spark_kafka_share.configure(builder)
else:
    builder = builder.config("spark.jars.packages", config["packages"])
spark = builder.getOrCreate()
spark.sparkContext.setLogLevel(config.get("log_level", "ERROR"))

reader = spark.readStream.format(config["source"]).option("kafka.bootstrap.servers", config["bootstrap"]) \
    .option("subscribe", config["topic"]).option("startingOffsets", "earliest")
if config["source"] == "kafka-share":
    reader = reader.options(**{"kafka.share.group.id": config["group"], "kafka.share.parallelism": str(config["parallelism"]),
                               "kafka.share.exactly.once.strategy": config["strategy"]})
else:
    reader = reader.option("minPartitions", str(config["parallelism"]))
for key, value in (config.get("options") or {}).items():
    reader = reader.option(key, str(value))
frame = reader.load()
if config.get("work_ms"):
    # Blocking work per record (a call to a service, say), in Python workers: the scaling benchmark.
    from pyspark.sql.functions import udf

    pause = float(config["work_ms"]) / 1000

    @udf("int", useArrow=False)  # pyarrow is not in the test virtualenv
    def work(value: bytes) -> int:
        time.sleep(pause)
        return len(value)

    frame = frame.select(work("value").alias("work"))
query = frame.writeStream.format("noop").option("checkpointLocation", config["checkpoint"]) \
    .trigger(processingTime="0 seconds").start()

def batch_end(progress: dict) -> float:  # type: ignore[type-arg]
    started = datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()
    return started + progress["durationMs"]["triggerExecution"] / 1000


deadline = time.time() + float(config.get("timeout_s", 900))
read = lambda: [p for p in query.recentProgress if p["numInputRows"] > 0]  # noqa: E731
while sum(p["numInputRows"] for p in read()) < config["records"] and time.time() < deadline and query.isActive:
    time.sleep(0.5)
batches = read()
if query.exception():  # a failed query must not pass for a slow one
    raise RuntimeError(f"the query failed: {query.exception()}")
query.stop()
total = sum(p["numInputRows"] for p in batches)
measured = total - batches[0]["numInputRows"] if batches else 0
seconds = max(batch_end(batches[-1]) - batch_end(batches[0]), 1e-9) if batches else 0.0
print(json.dumps({"records": total, "measured_records": measured, "seconds": round(seconds, 3),
                  "records_per_s": round(measured / seconds) if measured else 0, "batches": len(batches)}))
spark.stop()
