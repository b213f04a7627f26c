package io.github.kafkashare.spark

import java.util

import scala.jdk.CollectionConverters._

import io.github.kafkashare.spark.errors.ShareSourceErrors
import io.github.kafkashare.spark.options.ShareSourceOptions
import io.github.kafkashare.spark.planning.KafkaShareTable
import io.github.kafkashare.spark.reader.RecordSchema
import org.apache.spark.sql.connector.catalog.{Table, TableProvider}
import org.apache.spark.sql.connector.expressions.Transform
import org.apache.spark.sql.SQLContext
import org.apache.spark.sql.sources.{BaseRelation, DataSourceRegister, RelationProvider}
import org.apache.spark.sql.types.StructType
import org.apache.spark.sql.util.CaseInsensitiveStringMap

/**
 * Entry point Spark finds through META-INF/services: `spark.readStream.format("kafka-share")`.
 * Options are validated here, once, so a wrong option fails at `load()` and names itself.
 *
 * A batch read (`spark.read`) of a table that reads only as a stream falls back to Spark's older API,
 * which answers "not a valid Spark SQL Data Source" for a provider without it: [[RelationProvider]] is
 * here only to say what to do instead.
 */
final class KafkaShareSourceProvider extends TableProvider with DataSourceRegister with RelationProvider {

  override def shortName(): String = KafkaShareSourceProvider.ShortName

  override def inferSchema(options: CaseInsensitiveStringMap): StructType =
    RecordSchema(includeHeaders = ShareSourceOptions.parse(options.asCaseSensitiveMap.asScala.toMap).includeHeaders)

  override def getTable(schema: StructType, partitioning: Array[Transform], properties: util.Map[String, String]): Table =
    new KafkaShareTable(ShareSourceOptions.parse(properties.asScala.toMap))

  override def supportsExternalMetadata(): Boolean = false

  override def createRelation(sqlContext: SQLContext, parameters: Map[String, String]): BaseRelation =
    throw ShareSourceErrors.batchRead()
}

object KafkaShareSourceProvider {
  val ShortName = "kafka-share"
}
