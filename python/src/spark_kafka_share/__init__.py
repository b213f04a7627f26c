"""Kafka share groups as a Spark Structured Streaming source: the bundled jar, its helpers, typed options."""

from spark_kafka_share._version import __version__
from spark_kafka_share.classpath import JarNotLoadedError, configure, jar_path
from spark_kafka_share.options import KafkaShareOptions, StartingOffsets, Strategy

__all__ = ["__version__", "JarNotLoadedError", "KafkaShareOptions", "StartingOffsets", "Strategy", "configure", "jar_path"]
