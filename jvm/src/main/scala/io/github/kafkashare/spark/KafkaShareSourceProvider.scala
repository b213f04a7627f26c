package io.github.kafkashare.spark

import java.util

import scala.jdk.CollectionConverters._

import io.github.kafkashare.spark.options.ShareSourceOptions
import io.github.kafkashare.spark.planning.KafkaShareTable
import org.apache.spark.sql.connector.catalog.{Table, TableProvider}
import org.apache.spark.sql.connector.expressions.Transform
import org.apache.spark.sql.sources.DataSourceRegister
import org.apache.spark.sql.types.StructType
import org.apache.spark.sql.util.CaseInsensitiveStringMap

/**
 * Entry point Spark finds through META-INF/services: `spark.readStream.format("kafka-share")`.
 * Options are validated here, once, so a wrong option fails at `load()` and names itself.
 */
final class KafkaShareSourceProvider extends TableProvider with DataSourceRegister {

  override def shortName(): String = KafkaShareSourceProvider.ShortName

  override def inferSchema(options: CaseInsensitiveStringMap): StructType =
    RecordSchema(includeHeaders = ShareSourceOptions.parse(options.asCaseSensitiveMap.asScala.toMap).includeHeaders)

  override def getTable(schema: StructType, partitioning: Array[Transform], properties: util.Map[String, String]): Table =
    new KafkaShareTable(ShareSourceOptions.parse(properties.asScala.toMap))

  override def supportsExternalMetadata(): Boolean = false
}

object KafkaShareSourceProvider {
  val ShortName = "kafka-share"
}
