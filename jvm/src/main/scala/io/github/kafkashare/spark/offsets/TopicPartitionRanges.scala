package io.github.kafkashare.spark.offsets

/** Offset ranges per (topic, partition): the pinned set carried by the offsets. Immutable. */
final case class TopicPartitionRanges(byPartition: Map[(String, Int), OffsetRanges]) {

  def isEmpty: Boolean = byPartition.isEmpty

  def contains(topic: String, partition: Int, offset: Long): Boolean =
    byPartition.get((topic, partition)).exists(_.contains(offset))

  /** Whether some offset of `first..last` of that partition is in the set. */
  def overlaps(topic: String, partition: Int, first: Long, last: Long): Boolean =
    byPartition.get((topic, partition)).exists(_.overlaps(first, last))

  def union(other: TopicPartitionRanges): TopicPartitionRanges =
    TopicPartitionRanges((byPartition.keySet ++ other.byPartition.keySet).iterator.map { tp =>
      tp -> byPartition.getOrElse(tp, OffsetRanges.empty).union(other.byPartition.getOrElse(tp, OffsetRanges.empty))
    }.filter(!_._2.isEmpty).toMap)

  def minus(other: TopicPartitionRanges): TopicPartitionRanges =
    TopicPartitionRanges(byPartition.map { case (tp, r) =>
      tp -> other.byPartition.get(tp).fold(r)(r.minus)
    }.filter(!_._2.isEmpty))

  /** Keeps only offsets at or above each partition's start offset; partitions without one are kept whole. */
  def dropBelow(startOffsets: Map[(String, Int), Long]): TopicPartitionRanges =
    TopicPartitionRanges(byPartition.map { case (tp, r) =>
      tp -> startOffsets.get(tp).fold(r)(r.dropBelow)
    }.filter(!_._2.isEmpty))

  /** Whether some offset of `from until until` of that partition is not in the set. */
  def hasHoles(topic: String, partition: Int, from: Long, until: Long): Boolean =
    from < until && byPartition.get((topic, partition)).fold(0L)(_.countWithin(from, until)) < until - from

  def rangeCount: Int = byPartition.valuesIterator.map(_.ranges.size).sum
}

object TopicPartitionRanges {
  val empty: TopicPartitionRanges = TopicPartitionRanges(Map.empty)

  /** The set of records given as (topic, partition, offset), in any order. */
  def ofRecords(records: Iterator[(String, Int, Long)]): TopicPartitionRanges =
    TopicPartitionRanges(records.toSeq.groupMap(r => (r._1, r._2))(_._3).map { case (tp, offsets) =>
      tp -> OffsetRanges.ofOffsets(offsets)
    })
}
