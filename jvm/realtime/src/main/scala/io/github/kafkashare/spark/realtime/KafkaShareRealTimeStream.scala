package io.github.kafkashare.spark.realtime

import io.github.kafkashare.spark.ack.ExplicitQueries
import io.github.kafkashare.spark.metrics.QueryTotals
import io.github.kafkashare.spark.offsets.SerializableHadoopConf
import io.github.kafkashare.spark.options.ShareSourceOptions
import io.github.kafkashare.spark.planning.{ClusterView, KafkaShareMicroBatchStream, StreamSettings}
import org.apache.spark.sql.connector.read.{InputPartition, PartitionReaderFactory}
import org.apache.spark.sql.connector.read.streaming.{Offset, PartitionOffset, SupportsRealTimeMode}

/**
 * The stream with Spark's real-time interface (Spark 4.1 and later). Built in its own source set against
 * Spark 4.1, and loaded only where Spark has the interface (StreamStart): the connector's other classes
 * are built against Spark 4.0, which has none. Everything it does is the stream's own ([[RealTimeBatches]]
 * in the connector); this class only answers Spark's calls. Micro-batch triggers use it as they use its
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

  override def prepareForRealTimeMode(): Unit = enterRealTime()

  override def planInputPartitions(start: Offset): Array[InputPartition] = realTimePartitions(start)

  override def mergeOffsets(offsets: Array[PartitionOffset]): Offset = realTimeEnd(offsets)

  override def createReaderFactory(): PartitionReaderFactory =
    if (isRealTime) KafkaShareRealTimeReaderFactory else super.createReaderFactory()
}
