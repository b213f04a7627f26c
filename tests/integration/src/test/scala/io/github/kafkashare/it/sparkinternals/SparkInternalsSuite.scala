package io.github.kafkashare.it.sparkinternals

import io.github.kafkashare.it.stream.SharedSpark
import io.github.kafkashare.spark.sparkinternals.SparkInternalsCheck
import org.apache.spark.sql.SparkSession
import org.scalatest.funsuite.AnyFunSuite

/**
 * Each of Spark's internals the source touches (the `sparkinternals` package), tried on this test JVM's
 * Spark by SparkInternalsCheck: one named test per touchpoint, so that a Spark line that moves one fails
 * that test. The same check runs on the pytest lines (tests/python/test_spark_internals.py).
 */
abstract class SparkInternalsChecks(expectedSpark: String) extends AnyFunSuite {

  protected def spark: SparkSession

  private lazy val outcomes = SparkInternalsCheck.run(spark).map(o => o.touchpoint -> o).toMap

  test(s"this test JVM runs Spark $expectedSpark") {
    assert(spark.version == expectedSpark)
  }

  SparkInternalsCheck.Touchpoints.foreach { touchpoint =>
    test(s"$touchpoint holds on Spark $expectedSpark") {
      val outcome = outcomes(touchpoint)
      assert(outcome.held, outcome.detail)
      info(outcome.detail)
    }
  }
}

/** On the Spark line the connector compiles against (spark in versions.properties). */
class SparkInternalsSuite extends SparkInternalsChecks(sys.props("kafkashare.spark")) {
  protected def spark: SparkSession = SharedSpark.session
}
