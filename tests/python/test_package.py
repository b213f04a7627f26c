"""The installed wheel: its jar, its version, and the classpath helper's errors."""

import zipfile

import pytest
from pyspark.sql import SparkSession

import spark_kafka_share
from harness import pins
from spark_runs import run_spark


def test_version_comes_from_the_one_project_version() -> None:
    assert spark_kafka_share.__version__ == pins()["project.version"]


def test_jar_path_is_the_bundled_connector_jar() -> None:
    jar = spark_kafka_share.jar_path()
    assert jar.is_file() and "site-packages" in str(jar), "the jar must come from the installed wheel"
    with zipfile.ZipFile(jar) as z:
        names = set(z.namelist())
        services = z.read("META-INF/services/org.apache.spark.sql.sources.DataSourceRegister").decode()
        version = z.read("io/github/kafkashare/spark/version.properties").decode()
    assert "io.github.kafkashare.spark.KafkaShareSourceProvider" in services
    assert f"version={spark_kafka_share.__version__}" in version
    # kafka-clients is inside, relocated; neither Spark nor an unshaded Kafka class is.
    assert any(n.startswith("io/github/kafkashare/shaded/kafka/clients/consumer/KafkaShareConsumer") for n in names)
    assert not any(n.startswith(("org/apache/kafka/", "org/apache/spark/", "scala/")) for n in names)


def test_configure_adds_the_jar_and_keeps_other_jars() -> None:
    builder = SparkSession.builder.config("spark.jars", "/opt/other.jar")
    configured = spark_kafka_share.configure(builder)
    assert configured is builder
    jars = builder._options["spark.jars"].split(",")
    assert jars == ["/opt/other.jar", str(spark_kafka_share.jar_path())]
    spark_kafka_share.configure(builder)  # twice is harmless
    assert builder._options["spark.jars"].split(",") == jars
    builder._options.pop("spark.jars")  # the Builder's options are shared by every builder


@pytest.mark.parametrize("wrong", ["local[2]", None, SparkSession])
def test_configure_rejects_what_is_not_a_builder(wrong: object) -> None:
    with pytest.raises(TypeError, match=r"expects a pyspark\.sql\.SparkSession\.Builder .*got "):
        spark_kafka_share.configure(wrong)  # type: ignore[arg-type]


def test_configure_after_a_session_started_without_the_jar_says_what_to_do() -> None:
    outcome = run_spark("session_without_jar.py")
    assert outcome["error_type"] == "JarNotLoadedError"
    message = str(outcome["message"])
    assert "already running without the spark-kafka-share jar" in message
    assert "before the first getOrCreate()" in message and "--jars" in message


def test_real_time_trigger_names_the_spark_it_needs() -> None:
    """Where pyspark's trigger() has realTime (4.2+), its keywords; on an older one (make test-compat's 4.0),
    an error naming the pyspark needed."""
    import pyspark

    major, minor = (int(p) for p in pyspark.__version__.split(".")[:2])
    if (major, minor) >= (4, 2):
        assert spark_kafka_share.real_time("7 seconds") == {"realTime": "7 seconds"}
    else:
        needs = r"REAL_TIME_NEEDS_NEWER_SPARK.*needs pyspark 4.2 or newer"
        with pytest.raises(spark_kafka_share.RealTimeNeedsSparkError, match=needs):
            spark_kafka_share.real_time("7 seconds")
