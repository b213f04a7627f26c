"""Writes a class-data-sharing archive of Spark's classes for the tests' Spark JVMs (make test-setup).

Usage: JDK_JAVA_OPTIONS="-XX:ArchiveClassesAtExit=<file>" class_archive.py <scratch dir>

A Spark JVM of the tests spends most of its start loading, parsing and verifying the same ten thousand
classes of Spark's jars; a JVM started with -XX:SharedArchiveFile maps them from the archive instead
(docs/internals/testing.md). The JVM writes the archive when it exits: this application loads what the
tests' applications load (a batch job, a stateful stream, a file sink, a foreachBatch in Python, Python
workers) and ends. Nothing here is asserted: a JVM whose class path differs from this one's ignores the
archive and runs as before.
"""

import subprocess
import sys
import time
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.functions import col, window

scratch = Path(sys.argv[1])
spark = (
    SparkSession.builder.master("local[2]")
    .config("spark.ui.enabled", "false")
    .config("spark.sql.shuffle.partitions", "2")
    .getOrCreate()
)
spark.range(0, 10_000).selectExpr("id % 7 AS k").groupBy("k").count().collect()

rate = spark.readStream.format("rate").option("rowsPerSecond", 200).load()
counted = (
    rate.withWatermark("timestamp", "1 second")
    .groupBy(window(col("timestamp"), "1 second"))
    .count()
    .writeStream.outputMode("append")
    .format("parquet")
    .option("path", str(scratch / "out"))
    .option("checkpointLocation", str(scratch / "counted"))
    .trigger(processingTime="500 milliseconds")
    .start()
)


def each_batch(frame: DataFrame, batch_id: int) -> None:
    frame.count()
    spark.sparkContext.parallelize(range(100), 2).map(lambda v: v + 1).sum()  # Python workers


batches = (
    rate.writeStream.foreachBatch(each_batch)
    .option("checkpointLocation", str(scratch / "batches"))
    .trigger(processingTime="500 milliseconds")
    .start()
)
# Until each query has committed a batch with rows (the state store's, the file sink's and the commit
# log's classes loaded), or a minute: the archive is a speed-up, never a condition.
deadline = time.time() + 60
while time.time() < deadline and not all(any(p["numInputRows"] > 0 for p in q.recentProgress) for q in (counted, batches)):
    time.sleep(0.5)
counted.stop()
batches.stop()
# The JVM writes the archive as it exits, which it does when its stdin closes (PythonGatewayServer): wait
# for that, or make would take the file while the JVM is still writing it.
jvm = spark.sparkContext._gateway.proc  # type: ignore[union-attr]
spark.stop()
jvm.stdin.close()
try:
    jvm.wait(timeout=300)
except subprocess.TimeoutExpired:
    jvm.kill()
    raise
