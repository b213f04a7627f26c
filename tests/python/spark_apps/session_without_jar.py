"""A session started without the jar, then configure(): reports the error configure raises, as JSON."""

import json

from pyspark.sql import SparkSession

import spark_kafka_share

spark = SparkSession.builder.master("local[1]").appName("no-jar").getOrCreate()
try:
    try:
        spark_kafka_share.configure(SparkSession.builder)
        outcome = {"error_type": "", "message": ""}
    except Exception as e:
        outcome = {"error_type": type(e).__name__, "message": str(e)}
    print(json.dumps(outcome))
finally:
    spark.stop()
