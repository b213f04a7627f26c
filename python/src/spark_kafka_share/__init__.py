"""Kafka share groups as a Spark Structured Streaming source: the bundled jar, its helpers, typed options.

Documentation: https://github.com/kafkashare/spark-kafka-share/tree/main/docs
"""

from spark_kafka_share._version import __version__
from spark_kafka_share.acknowledge import DECISIONS, Decision, acknowledge
from spark_kafka_share.classpath import JarNotLoadedError, configure, jar_path
from spark_kafka_share.options import AcknowledgmentMode, DefaultDecision, KafkaShareOptions, StartingOffsets, Strategy
from spark_kafka_share.progress import KafkaShareProgress, NoKafkaShareSourceError, progress, progresses
from spark_kafka_share.real_time import RealTimeNeedsSparkError, real_time

__all__ = [
    "__version__",
    "AcknowledgmentMode",
    "DECISIONS",
    "Decision",
    "DefaultDecision",
    "JarNotLoadedError",
    "KafkaShareOptions",
    "KafkaShareProgress",
    "NoKafkaShareSourceError",
    "RealTimeNeedsSparkError",
    "StartingOffsets",
    "Strategy",
    "acknowledge",
    "configure",
    "jar_path",
    "progress",
    "progresses",
    "real_time",
]
