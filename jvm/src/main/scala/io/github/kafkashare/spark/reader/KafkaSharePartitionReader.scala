package io.github.kafkashare.spark.reader

import io.github.kafkashare.spark.ack.CommitWatcher
import io.github.kafkashare.spark.consumer.PooledShareConsumer
import io.github.kafkashare.spark.metrics.{AgeHistogram, ShareSourceMetrics => Metrics, TaskCounters}
import io.github.kafkashare.spark.monitoring.JvmActivity
import io.github.kafkashare.spark.offsets.AcquisitionEntry
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.connector.metric.CustomTaskMetric
import org.apache.spark.sql.connector.read.{PartitionReader, PartitionReaderFactory}

/**
 * Reads one task of one batch:
 *  - the log already has this (batch, task): another attempt ran it. Seal the task (the other
 *    attempt, if alive, can pin nothing more) and replay exactly the records of its parts; acquire
 *    nothing;
 *  - otherwise acquire and pin, poll after poll ([[PinnedPolls]]).
 */
final class KafkaSharePartitionReader(partition: KafkaShareInputPartition) extends PartitionReader[InternalRow] {

  private type Record = PooledShareConsumer.Record

  private val counters = new TaskCounters
  private val ages     = new AgeHistogram        // of the records emitted, merged into the batch's at close
  private val totals   = partition.totals.open() // here, inside the task, so that the task's updates count
  // Held batches are acknowledged after the task that acquired them ended; the next task here reports it.
  locally {
    val late = CommitWatcher.takeCounts(partition.consumerKey)
    counters.add(Metrics.Accepted, late.accepted); counters.add(Metrics.Released, late.released)
    counters.add(Metrics.Rejected, late.rejected)
  }
  // Last in the constructor: a reader that failed to build is never closed, and would count for ever.
  JvmActivity.taskStarted()
  private var ended                             = false
  private var acquisition: Option[PinnedPolls]  = None
  private var replay: Option[ReplayFetcher]     = None
  private var handedOver: Option[ReplayFetcher] = None
  private lazy val rows: Iterator[InternalRow] = {
    def records =
      if (partition.log.read(partition.batch, partition.task).isDefined) replaySealed()
      else {
        val polls = new PinnedPolls(partition, counters, () => replaySealed())
        acquisition = Some(polls)
        polls
      }
    (carried ++ records).map { case (r, count) =>
      if (r.timestamp >= 0) ages.record(System.currentTimeMillis - r.timestamp)
      RecordRows.toRow(r, count, partition.includeHeaders)
    }
  }
  private var current: InternalRow = _

  override def next(): Boolean =
    if (rows.hasNext) { current = rows.next(); true }
    else false

  override def get(): InternalRow = current

  override def currentMetricsValues(): Array[CustomTaskMetric] = counters.toTaskMetrics

  override def close(): Unit =
    try acquisition.foreach(_.close())
    finally
      try replay.foreach(_.close())
      finally
        try handedOver.foreach(_.close())
        finally {
          counters.addTo(totals)
          totals.emittedAges.add(ages)
          if (!ended) { ended = true; JvmActivity.taskEnded() }
        }

  /** What the real-time batch before pinned and did not emit (the query ran in real time before): first, in every attempt. */
  private def carried: Iterator[(Record, Int)] =
    if (partition.handedOver.carried.isEmpty) Iterator.empty
    else {
      val fetcher =
        new ReplayFetcher(Seq(AcquisitionEntry(partition.handedOver.carried)), partition.consumerKey.params, partition.failOnDataLoss)
      handedOver = Some(fetcher)
      fetcher.map { record => counters.add(Metrics.Replayed, 1); record }
    }

  private def replaySealed(): Iterator[(Record, Int)] = {
    val parts: Seq[AcquisitionEntry] = partition.log.sealTask(partition.batch, partition.task)
    val fetcher                      = new ReplayFetcher(parts, partition.consumerKey.params, partition.failOnDataLoss)
    replay = Some(fetcher)
    fetcher.map { record => counters.add(Metrics.Replayed, 1); record }
  }
}

object KafkaShareReaderFactory extends PartitionReaderFactory {
  override def createReader(partition: org.apache.spark.sql.connector.read.InputPartition): PartitionReader[InternalRow] =
    new KafkaSharePartitionReader(partition.asInstanceOf[KafkaShareInputPartition])
}
