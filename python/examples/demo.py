"""The README's demo: the kafka-share source reading from an embedded local Kafka broker.

One partition, 100,000 records, four share consumers reading that same partition (a plain Kafka
consumer group could use only one), exactly once into Parquet. Run it with `make demo`.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "python"))

from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql.functions import spark_partition_id  # noqa: E402

import spark_kafka_share  # noqa: E402
from harness import Broker, broker_versions  # noqa: E402  (the test harness starts the broker)
from spark_kafka_share import KafkaShareOptions  # noqa: E402

RECORDS = 100_000
work = Path(tempfile.mkdtemp(prefix="kafka-share-demo-"))
version = broker_versions()[-1]
print(f"Starting Kafka {version} (single node, KRaft, share groups on) in {work} ...")
broker = Broker(version, work / "broker").start()
try:
    broker.create_topic("orders", partitions=1)
    broker.produce("orders", RECORDS)
    print(f"Produced {RECORDS:,} records to 'orders' (1 partition) at {broker.bootstrap}")

    spark = (
        spark_kafka_share.configure(SparkSession.builder)
        .master("local[4]")
        .appName("kafka-share demo")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    options = KafkaShareOptions(
        bootstrap_servers=broker.bootstrap,
        group_id="demo",
        subscribe=["orders"],
        strategy="checkpoint-dedup",
        parallelism=4,
        starting_offsets="earliest",
    )
    sink = work / "sink"

    def write(batch: DataFrame, batch_id: int) -> None:
        # Per batch id, overwritten on a re-run: the idempotent sink exactly-once needs.
        (
            batch.selectExpr("CAST(key AS STRING) AS k", "partition", "offset", "deliveryCount")
            .withColumn("consumer", spark_partition_id())
            .write.mode("overwrite")
            .parquet(f"{sink}/batch={batch_id}")
        )

    query = (
        spark.readStream.format("kafka-share")
        .options(**options.to_dict())
        .load()
        .writeStream.foreachBatch(write)
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(processingTime="0 seconds")
        .start()
    )
    started, landed = time.time(), 0
    while landed < RECORDS and time.time() - started < 300:
        time.sleep(2)
        landed = sum(p["numInputRows"] for p in query.recentProgress)
        print(f"  {landed:,} records read so far")
    query.processAllAvailable()  # let the batch in flight finish, so the stop interrupts nothing
    query.stop()

    result = spark.read.parquet(str(sink))
    print("Records per share consumer (input partition), all reading partition 0:")
    for row in result.groupBy("consumer").count().orderBy("consumer").collect():
        print(f"  consumer {row['consumer']}: {row['count']:,}")
    rows = result.count()
    distinct = result.select("k").distinct().count()
    print(f"produced {RECORDS}, landed {rows}, lost {RECORDS - distinct}, doubled {rows - distinct}")
    spark.stop()
    sys.exit(0 if distinct == RECORDS == rows else 1)
finally:
    broker.stop()
