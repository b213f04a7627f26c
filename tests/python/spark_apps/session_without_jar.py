"""A Spark without the connector jar, then configure(): reports the error configure raises, as JSON.

Usage: session_without_jar.py [how]   how: classic (default) | connect | submitted
  classic    a local session starts first, then configure(SparkSession.builder)
  connect    a Spark Connect session (a local Connect server that pyspark starts) first, then configure()
  submitted  run by spark-submit without --jars or --packages: configure(builder) before any session
"""

import json
import sys

from pyspark.sql import SparkSession

import spark_kafka_share

how = sys.argv[1] if len(sys.argv) > 1 else "classic"
builder = SparkSession.builder.appName(f"no-jar-{how}")
if how == "classic":
    builder.master("local[1]").getOrCreate()
elif how == "connect":
    builder.remote("local[1]").getOrCreate()
elif how != "submitted":
    raise SystemExit(f"unknown way to start Spark: {how}")
try:
    try:
        spark_kafka_share.configure(SparkSession.builder).getOrCreate()
        outcome = {"error_type": "", "message": ""}
    except Exception as e:
        outcome = {"error_type": type(e).__name__, "message": str(e)}
    print(json.dumps(outcome))
finally:
    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
