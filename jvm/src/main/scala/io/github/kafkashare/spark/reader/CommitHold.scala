package io.github.kafkashare.spark.reader

import io.github.kafkashare.spark.ack.CommitWatcher
import io.github.kafkashare.spark.consumer.PooledShareConsumer
import org.apache.hadoop.fs.Path

/** Two-phase commit and explicit mode: a read task's consumer goes to this JVM's commit watcher with its records held. */
private[reader] object CommitHold {

  /** `lockAgeMs`: how long ago the held records were fetched (a carry's or the client's buffer's locks started then). */
  def handOver(partition: KafkaShareInputPartition, consumer: PooledShareConsumer, lockAgeMs: Long): Unit = {
    val renewal    = if (partition.renewLocks) Some(CommitWatcher.Renewal(partition.locks)) else None
    val lockLeftMs = renewal.fold(partition.locks.unrenewedHoldMs)(_.everyMs) - lockAgeMs
    CommitWatcher.holdUntilCommitted(
      consumer,
      new Path(partition.commitFile),
      partition.hadoopConf,
      math.max(lockLeftMs, 0L),
      renewal,
      partition.explicitDefault.map(CommitWatcher.ExplicitDecisions(partition.decisions, partition.batch, _)),
      CommitWatcher.DoneMark(partition.markers, partition.batch, partition.task)
    )
  }
}
