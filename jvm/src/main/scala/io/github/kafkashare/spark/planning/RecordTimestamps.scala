package io.github.kafkashare.spark.planning

import java.time.Duration
import java.util.Collections

import scala.collection.mutable
import scala.jdk.CollectionConverters._

import org.apache.kafka.clients.consumer.Consumer
import org.apache.kafka.common.TopicPartition

/**
 * Reads the timestamp of the record at an offset of each partition with a plain consumer: assigned, not a
 * group member (it commits nothing and takes no record from the share group), one seek per partition and
 * polls until each answered or `budgetMs` ran out. The first record a poll returns for a partition is the
 * one at the offset, or the next one there (a transaction marker or a compacted record is skipped).
 */
private[planning] final class RecordTimestamps(consumer: Consumer[Array[Byte], Array[Byte]], budgetMs: Long) {

  def at(offsets: Map[(String, Int), Long]): Map[(String, Int), Long] = {
    val wanted = offsets.map { case ((t, p), o) => new TopicPartition(t, p) -> o }
    consumer.assign(wanted.keys.asJavaCollection)
    wanted.foreach { case (tp, o) => consumer.seek(tp, o) }
    val found    = mutable.Map.empty[(String, Int), Long]
    val deadline = System.nanoTime + budgetMs * 1000000L
    try
      while (found.size < wanted.size && System.nanoTime < deadline) {
        val records = consumer.poll(Duration.ofMillis(100))
        records.partitions.asScala.foreach { tp =>
          val first = records.records(tp)
          if (!first.isEmpty && !found.contains((tp.topic, tp.partition))) {
            found((tp.topic, tp.partition)) = first.get(0).timestamp
            consumer.pause(Collections.singleton(tp)) // answered: fetch no more of it
          }
        }
      }
    finally consumer.resume(consumer.paused())
    found.toMap
  }
}
