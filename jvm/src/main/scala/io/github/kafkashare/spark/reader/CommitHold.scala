package io.github.kafkashare.spark.reader

import io.github.kafkashare.spark.ack.CommitWatcher
import io.github.kafkashare.spark.consumer.PooledShareConsumer

/** Two-phase commit and explicit mode: a read task's consumer goes to this JVM's commit watcher with its records held. */
private[reader] object CommitHold {

  /** `lockAgeMs`: how long ago the held records were fetched (a carry's or the client's buffer's locks started then). */
  def handOver(partition: KafkaShareInputPartition, consumer: PooledShareConsumer, lockAgeMs: Long, watcher: CommitWatcher): Unit = {
    val renewal    = if (partition.query.renewLocks) Some(CommitWatcher.Renewal(partition.query.locks)) else None
    val lockLeftMs = renewal.fold(partition.query.locks.unrenewedHoldMs)(_.everyMs) - lockAgeMs
    watcher.holdUntilCommitted(
      consumer,
      partition.commitFile,
      partition.query.hadoopConf,
      math.max(lockLeftMs, 0L),
      renewal,
      partition.query.explicitDefault.map(CommitWatcher.ExplicitDecisions(partition.query.decisions, partition.batch, _)),
      CommitWatcher.DoneMark(partition.query.markers, partition.batch, partition.task)
    )
  }
}
