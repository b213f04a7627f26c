"""configure() before the first session: reports the session's spark.plugins and the names of the connector's
plugin metrics that the driver's metrics system serves (Spark's default JSON servlet, /metrics/json), as JSON."""

import json
import urllib.request

from pyspark.sql import SparkSession

import spark_kafka_share
from spark_kafka_share.classpath import PLUGIN

builder = SparkSession.builder.appName("plugin").master("local[1]").config("spark.ui.port", "0")
spark = spark_kafka_share.configure(builder).getOrCreate()
try:
    url = spark.sparkContext.uiWebUrl
    assert url, "the Spark UI is off"
    with urllib.request.urlopen(f"{url}/metrics/json/", timeout=30) as response:
        served = json.load(response)
    # Spark names a plugin's metric source plugin.<its class> (PluginContextImpl.registerMetrics).
    names = sorted(name for kind in served.values() if isinstance(kind, dict) for name in kind if f"plugin.{PLUGIN}." in name)
    print(json.dumps({"plugins": spark.conf.get("spark.plugins"), "metrics": names}))
finally:
    spark.stop()
