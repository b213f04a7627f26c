package io.github.kafkashare.spark

import java.util
import java.util.Locale

import scala.jdk.CollectionConverters._

import io.github.kafkashare.spark.ack.DecisionsTable
import io.github.kafkashare.spark.errors.ShareSourceErrors
import io.github.kafkashare.spark.options.OptionDeclarations
import org.apache.spark.sql.connector.catalog.{Table, TableProvider}
import org.apache.spark.sql.connector.expressions.Transform
import org.apache.spark.sql.sources.DataSourceRegister
import org.apache.spark.sql.types.StructType
import org.apache.spark.sql.util.CaseInsensitiveStringMap
import org.apache.spark.sql.DataFrame

/**
 * `format("kafka-share-decisions")`: where an explicit-mode foreachBatch writes its decisions. Users
 * call [[KafkaShareDecisions.acknowledge]] (Scala) or `spark_kafka_share.acknowledge` (Python).
 */
final class KafkaShareDecisionsProvider extends TableProvider with DataSourceRegister {

  override def shortName(): String = KafkaShareDecisionsProvider.ShortName

  override def inferSchema(options: CaseInsensitiveStringMap): StructType = DecisionsTable.Schema

  override def getTable(schema: StructType, partitioning: Array[Transform], properties: util.Map[String, String]): Table = {
    val options = properties.asScala.map { case (k, v) => k.toLowerCase(Locale.ROOT) -> v.trim }
    val group = options.get(OptionDeclarations.GroupId.toLowerCase(Locale.ROOT)).filter(_.nonEmpty)
      .getOrElse(throw ShareSourceErrors.missingOption(OptionDeclarations.GroupId, "orders-processing"))
    val batch = options.get("batchid").map(v =>
      v.toLongOption.filter(_ >= 0)
        .getOrElse(throw ShareSourceErrors.invalidValue("batchId", v, "the batch id foreachBatch received"))
    )
      .getOrElse(throw ShareSourceErrors.missingOption("batchId", "3"))
    new DecisionsTable(group, batch)
  }
}

object KafkaShareDecisionsProvider {
  val ShortName = "kafka-share-decisions"
}

/**
 * Explicit acknowledgement from a Scala foreachBatch:
 * {{{
 * .foreachBatch { (batch: DataFrame, batchId: Long) =>
 *   val results = process(batch)
 *   KafkaShareDecisions.acknowledge(
 *     results.select($"topic", $"partition", $"offset",
 *       when($"ok", "accept").when($"retry", "release").otherwise("reject").as("decision")),
 *     batchId, "orders-processing")
 * }
 * }}}
 * The decisions are applied after the batch commits; records without one get
 * `kafka.share.acknowledgment.default`. A later call in the same batch replaces an earlier one.
 */
object KafkaShareDecisions {
  def acknowledge(decisions: DataFrame, batchId: Long, groupId: String): Unit =
    decisions.write.format(KafkaShareDecisionsProvider.ShortName).mode("append")
      .option(OptionDeclarations.GroupId, groupId).option("batchId", batchId.toString).save()
}
