"""configure() before the first session: reports the session's spark.plugins and how many metric sources of the
connector's plugin the driver's metrics system has, as JSON. Classic Spark (the metrics system is read over py4j)."""

import json

from pyspark.sql import SparkSession

import spark_kafka_share
from spark_kafka_share.classpath import PLUGIN

spark = spark_kafka_share.configure(SparkSession.builder.appName("plugin").master("local[1]")).getOrCreate()
try:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    # Spark names a plugin's metric source plugin.<its class> (PluginContextImpl.registerMetrics).
    sources = jvm.org.apache.spark.SparkEnv.get().metricsSystem().getSourcesByName(f"plugin.{PLUGIN}")
    print(json.dumps({"plugins": spark.conf.get("spark.plugins"), "metric_sources": sources.size()}))
finally:
    spark.stop()
