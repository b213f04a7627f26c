package io.github.kafkashare.spark.realtime

import io.github.kafkashare.spark.ack.ExplicitQueries
import io.github.kafkashare.spark.metrics.QueryTotals
import io.github.kafkashare.spark.offsets.SerializableHadoopConf
import io.github.kafkashare.spark.options.ShareSourceOptions
import io.github.kafkashare.spark.planning.{ClusterView, KafkaShareMicroBatchStream, RealTimePlanning, StreamSettings}
import org.apache.spark.sql.connector.read.{InputPartition, PartitionReaderFactory}
import org.apache.spark.sql.connector.read.streaming.{Offset, PartitionOffset, SupportsRealTimeMode}

/**
 * The stream with Spark's real-time interface (Spark 4.1 and later). Built in its own source set against
 * Spark 4.1, and loaded only where Spark has the interface (StreamStart): the connector's other classes
 * are built against Spark 4.0, which has none. Everything it does is the connector's ([[RealTimePlanning]]);
 * this class only answers Spark's calls. Micro-batch triggers use it as they use its
 * parent.
 */
final class KafkaShareRealTimeStream(
    options: ShareSourceOptions,
    checkpointDir: String,
    cluster: ClusterView,
    settings: StreamSettings,
    hadoopConf: SerializableHadoopConf,
    totals: QueryTotals,
    explicit: Option[ExplicitQueries.Registration]
) extends KafkaShareMicroBatchStream(options, checkpointDir, cluster, settings, hadoopConf, totals, explicit)
    with SupportsRealTimeMode {

  // Spark's real-time mode, once Spark said so (before the first batch).
  private var realTime = Option.empty[RealTimePlanning]

  private def planning: RealTimePlanning = realTime.getOrElse(throw new IllegalStateException("real-time call before real-time mode"))

  override def prepareForRealTimeMode(): Unit = realTime = Some(realTimePlanning())

  // Spark asks before every real-time batch, for its progress only: the batch's end comes from its tasks.
  override protected def nextOffset(startOffset: Offset): Offset = if (realTime.nonEmpty) startOffset else super.nextOffset(startOffset)

  override def planInputPartitions(start: Offset): Array[InputPartition] = planning.partitions(start)

  override def mergeOffsets(offsets: Array[PartitionOffset]): Offset = planning.end(offsets)

  override def stop(): Unit =
    try realTime.foreach(_.stop())
    finally super.stop()

  override def createReaderFactory(): PartitionReaderFactory =
    if (realTime.nonEmpty) KafkaShareRealTimeReaderFactory else super.createReaderFactory()
}
