package io.github.kafkashare.spark.planning

import java.util

import io.github.kafkashare.spark.reader.RecordSchema
import io.github.kafkashare.spark.errors.ShareSourceErrors
import io.github.kafkashare.spark.metrics.ShareSourceMetrics
import io.github.kafkashare.spark.options.{ShareSourceOptions, Subscription}
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.connector.catalog.{SupportsRead, Table, TableCapability}
import org.apache.spark.sql.connector.metric.{CustomMetric, CustomTaskMetric}
import org.apache.spark.sql.connector.read.{Scan, ScanBuilder}
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream
import org.apache.spark.sql.types.StructType
import org.apache.spark.sql.util.CaseInsensitiveStringMap

/** A share group read as a stream. Options were validated before this is built. */
final class KafkaShareTable(options: ShareSourceOptions) extends Table with SupportsRead {

  override def name(): String = s"kafka-share ${options.groupId} ${KafkaShareTable.describe(options.subscription)}"

  override def schema(): StructType = RecordSchema(options.includeHeaders)

  override def capabilities(): util.Set[TableCapability] = util.EnumSet.of(TableCapability.MICRO_BATCH_READ)

  override def newScanBuilder(ignored: CaseInsensitiveStringMap): ScanBuilder = () => new KafkaShareScan(options)
}

final class KafkaShareScan(options: ShareSourceOptions) extends Scan {

  override def readSchema(): StructType = RecordSchema(options.includeHeaders)

  // What the plan and the UI show: no client settings, which may hold secrets.
  override def description(): String =
    s"kafka-share [group=${options.groupId}, ${KafkaShareTable.describe(options.subscription)}, strategy=${options.strategy.name}]"

  @volatile private var stream: Option[KafkaShareMicroBatchStream] = None

  override def toMicroBatchStream(checkpointLocation: String): MicroBatchStream = {
    val spark = SparkSession.active
    if (spark.conf.get("spark.speculation", "false").trim.equalsIgnoreCase("true"))
      throw ShareSourceErrors.speculationEnabled()
    val started = StreamStart(options, checkpointLocation, spark)
    stream = Some(started)
    started
  }

  override def supportedCustomMetrics(): Array[CustomMetric] = ShareSourceMetrics.supported

  // The SQL tab's scan node shows it per batch (Spark 4.1 and later post driver metrics of micro-batch scans).
  override def reportDriverMetrics(): Array[CustomTaskMetric] =
    stream.map(s => Array(ShareSourceMetrics.taskMetric(ShareSourceMetrics.Backlog.name, s.backlogAtPlanning))).getOrElse(Array.empty)
}

object KafkaShareTable {
  def describe(subscription: Subscription): String = subscription match {
    case Subscription.Topics(names)   => s"subscribe=${names.mkString(",")}"
    case Subscription.TopicPattern(p) => s"subscribePattern=$p"
  }
}
