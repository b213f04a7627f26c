package io.github.kafkashare.spark.metrics

import io.github.kafkashare.spark.offsets.TopicPartitionRanges

/**
 * The records available to the share group, per topic: what users size and autoscale a queue by.
 *
 * Per partition, the log end offset minus the group's start offset (below which everything is
 * acknowledged for good), minus the records this query pinned above the start offset (acknowledged,
 * or held until the batch commits: the start offset trails acknowledgements, docs/internals/kafka-facts.md).
 * Works on 4.1 brokers: it needs only ListOffsets and ListShareGroupOffsets.
 *
 * What the source cannot see is counted as available: records that other members of the group
 * (other queries, other consumers) hold or acknowledged above the start offset. A partition the group
 * has never read counts 0: where reading starts there is the group's share.auto.offset.reset.
 *
 * Brokers from Kafka 4.2 report the lag themselves (KIP-1226): they know what every member acknowledged
 * above the start offset, so [[fromBroker]] takes theirs.
 */
final case class Backlog(byPartition: Map[(String, Int), Long]) {
  lazy val byTopic: Map[String, Long] = byPartition.toSeq.map { case ((t, _), n) => t -> n }.groupMapReduce(_._1)(_._2)(_ + _)

  def total: Long = byPartition.valuesIterator.sum

  /** The partitions that have records available: where the backlog's age is read (BacklogAge). */
  def partitionsWithRecords: Set[(String, Int)] = byPartition.collect { case (tp, n) if n > 0 => tp }.toSet

  /** `topic=records` pairs, by topic, for a progress metric (a string, as Spark's metrics are). */
  def render: String = byTopic.toSeq.sorted.map { case (t, n) => s"$t=$n" }.mkString(",")
}

object Backlog {
  val none: Backlog = Backlog(Map.empty)

  /** The broker's own lag per partition (Kafka 4.2+); a partition it reports none for counts 0, as in [[of]]. */
  def fromBroker(ends: Map[(String, Int), Long], brokerLag: Map[(String, Int), Option[Long]]): Backlog =
    Backlog(ends.map { case (tp, _) => tp -> brokerLag.get(tp).flatten.fold(0L)(math.max(0L, _)) })

  def of(ends: Map[(String, Int), Long], startOffsets: Map[(String, Int), Long], pinned: TopicPartitionRanges): Backlog =
    Backlog(ends.map { case (tp, end) =>
      tp -> startOffsets.get(tp).fold(0L) { start =>
        val pinnedAbove = pinned.byPartition.get(tp).fold(0L)(_.countWithin(start, end))
        math.max(0L, end - start - pinnedAbove)
      }
    })
}
