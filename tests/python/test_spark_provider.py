"""Real Spark, with the jar from the installed wheel: the kafka-share format resolves to our provider."""

import pytest

import spark_kafka_share
from harness import pins
from spark_runs import run_spark


@pytest.mark.parametrize("master,executors", [("local[2]", 0), ("local-cluster[2,1,1024]", 2)])
def test_kafka_share_format_resolves_to_the_provider(master: str, executors: int) -> None:
    seen = run_spark("provider_probe.py", master)

    assert seen["provider"] == "io.github.kafkashare.spark.KafkaShareSourceProvider"
    assert seen["jars"] == str(spark_kafka_share.jar_path())
    # The provider validates options at load() and names what is missing.
    assert "[KAFKA_SHARE_INVALID_OPTION.MISSING] " in str(seen["load_error"])
    assert "option 'kafka.bootstrap.servers' is required" in str(seen["load_error"])
    described = f"spark-kafka-share {spark_kafka_share.__version__} (kafka-clients {pins()['kafka.clients']})"
    # Every task, on every executor JVM, loaded the jar and its shaded kafka-clients.
    assert seen["executor_versions"] == [described]
    assert seen["executors"] == executors
