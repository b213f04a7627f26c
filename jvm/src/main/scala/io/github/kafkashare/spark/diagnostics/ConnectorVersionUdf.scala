package io.github.kafkashare.spark.diagnostics

import org.apache.spark.sql.api.java.UDF0

/**
 * A SQL function that answers "which connector do the executors run?":
 * {{{
 *   spark.udf.registerJavaFunction("kafka_share_version",
 *     "io.github.kafkashare.spark.diagnostics.ConnectorVersionUdf")
 *   spark.range(4).repartition(4).selectExpr("kafka_share_version()").distinct().show()
 * }}}
 * It runs where the query runs, so it proves the jar and its bundled kafka-clients load there.
 */
final class ConnectorVersionUdf extends UDF0[String] {
  override def call(): String = ConnectorInfo.describe
}
