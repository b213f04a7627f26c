package io.github.kafkashare.spark.reader

import io.github.kafkashare.spark.consumer.PooledShareConsumer
import io.github.kafkashare.spark.metrics.{AgeHistogram, ShareSourceMetrics => Metrics, TaskCounters}
import io.github.kafkashare.spark.monitoring.JvmActivity
import io.github.kafkashare.spark.offsets.AcquisitionEntry
import org.apache.spark.sql.catalyst.InternalRow

/**
 * What every read task keeps, in either mode: its counters, the ages of the rows it emitted, the
 * fetchers of what it reads back, and its end, which adds all of it to the query's totals once. Build
 * it last in a reader's constructor: a reader that failed to build is never closed, and would count
 * as a running task for ever.
 */
private[reader] final class ReadTaskBase(partition: KafkaShareInputPartition) {

  private type Record = PooledShareConsumer.Record

  val counters         = new TaskCounters
  private val ages     = new AgeHistogram        // of the rows emitted, merged into the batch's at the end
  private val totals   = partition.totals.open() // here, inside the task, so that the task's updates count
  private var fetchers = List.empty[ReplayFetcher]
  private var ended    = false
  private val began    = System.nanoTime
  JvmActivity.taskStarted()

  /** The records `parts` name, read back by offset, counted as replayed. */
  def replayOf(parts: Seq[AcquisitionEntry]): Iterator[(Record, Int)] = {
    val fetcher = new ReplayFetcher(parts, partition.query.consumerKey.params, partition.query.failOnDataLoss)
    fetchers ::= fetcher
    fetcher.map { record => counters.add(Metrics.Replayed, 1); record }
  }

  /** What the real-time batch before pinned and did not emit: emitted first, in every attempt (see [[HandedOver]]). */
  def carried: Seq[AcquisitionEntry] =
    if (partition.handedOver.carried.isEmpty) Nil else Seq(AcquisitionEntry(partition.handedOver.carried))

  /** The row of `record`, its age noted. */
  def row(record: Record, deliveryCount: Int): InternalRow = {
    if (record.timestamp >= 0) ages.record(System.currentTimeMillis - record.timestamp)
    RecordRows.toRow(record, deliveryCount, partition.query.includeHeaders)
  }

  /** Ends the task: `first` (the polls' end), then the fetchers closed and the task's figures added, whatever failed. */
  def close(first: => Unit): Unit =
    try first
    finally
      try closeAll(fetchers)
      finally {
        counters.addTo(totals)
        totals.emittedAges.add(ages)
        totals.taskMs.add((System.nanoTime - began) / 1000000L)
        if (!ended) { ended = true; JvmActivity.taskEnded() }
      }

  private def closeAll(open: List[ReplayFetcher]): Unit = open match {
    case fetcher :: more =>
      try fetcher.close()
      finally closeAll(more)
    case Nil =>
  }
}
