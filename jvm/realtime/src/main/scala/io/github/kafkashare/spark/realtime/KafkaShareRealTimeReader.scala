package io.github.kafkashare.spark.realtime

import io.github.kafkashare.spark.reader.{KafkaShareInputPartition, RealTimeRecords}
import io.github.kafkashare.spark.runtime.JvmResources
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.connector.metric.CustomTaskMetric
import org.apache.spark.sql.connector.read.{InputPartition, PartitionReader, PartitionReaderFactory}
import org.apache.spark.sql.connector.read.streaming.{PartitionOffset, SupportsRealTimeRead}
import org.apache.spark.sql.connector.read.streaming.SupportsRealTimeRead.RecordStatus

/**
 * A real-time read task as Spark asks for it ([[RealTimeRecords]] does the reading).
 *
 * Spark changed how it asks for the next row: Spark 4.1 calls `nextWithTimeout(timeoutMs)`, Spark 4.2.0
 * only `nextWithTimeout(startTimeMs, timeoutMs)` (SPARK-55699), and later releases call the second, whose
 * default calls the first (SPARK-58386). Built against 4.1, this class has both, so one jar serves every
 * line: the second is no override here, but the JVM finds it by name and signature on 4.2 and later.
 */
final class KafkaShareRealTimeReader(records: RealTimeRecords) extends SupportsRealTimeRead[InternalRow] {

  override def nextWithTimeout(timeoutMs: java.lang.Long): RecordStatus = status(records.next(timeoutMs))

  // The wait counts from `startTimeMs`, Spark's clock reading when it computed the timeout.
  def nextWithTimeout(startTimeMs: java.lang.Long, timeoutMs: java.lang.Long): RecordStatus =
    status(records.next(timeoutMs - math.max(0L, System.currentTimeMillis - startTimeMs)))

  private def status(hasRecord: Boolean): RecordStatus = RecordStatus.newStatusWithoutArrivalTime(hasRecord)

  // Real time never calls next(): its wrapper asks nextWithTimeout. Without a deadline, next() would poll forever.
  override def next(): Boolean = throw new UnsupportedOperationException("a real-time read task is read with nextWithTimeout")

  override def get(): InternalRow = records.get

  override def getOffset: PartitionOffset = records.end

  override def currentMetricsValues(): Array[CustomTaskMetric] = records.currentMetricsValues

  override def close(): Unit = records.close()
}

object KafkaShareRealTimeReaderFactory extends PartitionReaderFactory {
  override def createReader(partition: InputPartition): PartitionReader[InternalRow] =
    new KafkaShareRealTimeReader(new RealTimeRecords(partition.asInstanceOf[KafkaShareInputPartition], JvmResources))
}
