"""Starts Spark with the jar from the installed wheel and reports what the JVMs see, as one JSON line.

Usage: provider_probe.py <master>   e.g. local[2] or local-cluster[2,1,1024]
"""

import json
import sys

from pyspark.sql import SparkSession

import spark_kafka_share

master = sys.argv[1]
spark = spark_kafka_share.configure(SparkSession.builder.master(master).appName("provider-probe")).getOrCreate()
try:
    jvm = spark._jvm
    assert jvm is not None
    lookup = jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource
    provider = lookup("kafka-share", spark._jsparkSession.sessionState().conf()).getName()

    try:
        spark.readStream.format("kafka-share").option("subscribe", "orders").load()
        load_error = ""
    except Exception as e:  # the message is what this probe reports
        load_error = str(e)

    # Runs inside the executors: proves the jar (and its shaded kafka-clients) reached them.
    spark.udf.registerJavaFunction("kafka_share_version", "io.github.kafkashare.spark.diagnostics.ConnectorVersionUdf")
    rows = spark.range(0, 8, 1, 4).selectExpr("kafka_share_version() AS v").distinct().collect()
    executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1  # minus the driver

    print(
        json.dumps(
            {
                "provider": provider,
                "load_error": load_error,
                "executor_versions": sorted(r.v for r in rows),
                "executors": executors,
                "jars": spark.conf.get("spark.jars"),
            }
        )
    )
finally:
    spark.stop()
