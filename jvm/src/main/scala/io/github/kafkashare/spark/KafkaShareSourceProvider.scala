package io.github.kafkashare.spark

import java.util

import org.apache.spark.sql.connector.catalog.{Table, TableProvider}
import org.apache.spark.sql.connector.expressions.Transform
import org.apache.spark.sql.sources.DataSourceRegister
import org.apache.spark.sql.types.StructType
import org.apache.spark.sql.util.CaseInsensitiveStringMap

/**
 * Entry point Spark finds through META-INF/services: `spark.readStream.format("kafka-share")`.
 *
 * This build carries the provider, the schema and the packaging; the micro-batch reader comes next.
 * Until then a query fails at `load()` with a message that says which connector answered, so a user
 * can tell "the jar is on the class path" from "the jar is missing".
 */
final class KafkaShareSourceProvider extends TableProvider with DataSourceRegister {

  override def shortName(): String = KafkaShareSourceProvider.ShortName

  override def inferSchema(options: CaseInsensitiveStringMap): StructType =
    RecordSchema(includeHeaders = options.getBoolean("includeHeaders", false))

  override def getTable(
      schema: StructType,
      partitioning: Array[Transform],
      properties: util.Map[String, String]): Table =
    throw new UnsupportedOperationException(
      s"${KafkaShareSourceProvider.ShortName}: ${ConnectorInfo.describe} is installed " +
        s"(${classOf[KafkaShareSourceProvider].getName}), but this build has no micro-batch reader yet.")
}

object KafkaShareSourceProvider {
  val ShortName = "kafka-share"
}
