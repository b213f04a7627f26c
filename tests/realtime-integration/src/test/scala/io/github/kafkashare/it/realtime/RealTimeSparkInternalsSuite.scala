package io.github.kafkashare.it.realtime

import io.github.kafkashare.it.sparkinternals.SparkInternalsChecks
import org.apache.spark.sql.SparkSession

/** The touchpoints on the oldest Spark line with real-time mode (spark.realtime), where the real-time stream loads. */
class RealTimeSparkInternalsSuite extends SparkInternalsChecks(sys.props("kafkashare.spark.realtime")) {
  protected def spark: SparkSession = RealTimeSpark.session
}
