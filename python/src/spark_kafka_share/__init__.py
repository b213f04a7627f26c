"""Kafka share groups as a Spark Structured Streaming source: the bundled jar and its helpers."""

from spark_kafka_share._version import __version__
from spark_kafka_share.classpath import JarNotLoadedError, configure, jar_path

__all__ = ["__version__", "JarNotLoadedError", "configure", "jar_path"]
