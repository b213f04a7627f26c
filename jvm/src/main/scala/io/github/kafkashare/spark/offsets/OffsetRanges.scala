package io.github.kafkashare.spark.offsets

/** Inclusive offsets `first..last` of one partition. */
final case class OffsetRange(first: Long, last: Long) {
  require(first <= last, s"empty range $first..$last")
  def size: Long = last - first + 1
}

/**
 * A set of offsets of one partition, kept as sorted, disjoint, non-adjacent ranges: a share
 * consumer's acquisitions are mostly runs of consecutive offsets, so a batch of thousands of records
 * is a handful of ranges. Immutable.
 */
final class OffsetRanges private (val ranges: Vector[OffsetRange]) extends Serializable {

  def isEmpty: Boolean = ranges.isEmpty
  def count: Long      = ranges.iterator.map(_.size).sum

  def contains(offset: Long): Boolean = {
    var lo = 0
    var hi = ranges.size - 1
    while (lo <= hi) {
      val mid = (lo + hi) >>> 1
      val r   = ranges(mid)
      if (offset < r.first) hi = mid - 1
      else if (offset > r.last) lo = mid + 1
      else return true
    }
    false
  }

  /** Whether some offset of `first..last` is in the set. */
  def overlaps(first: Long, last: Long): Boolean = {
    // The first range that ends at or after `first`; the set overlaps if it starts by `last`.
    var lo = 0
    var hi = ranges.size
    while (lo < hi) {
      val mid = (lo + hi) >>> 1
      if (ranges(mid).last < first) lo = mid + 1 else hi = mid
    }
    lo < ranges.size && ranges(lo).first <= last
  }

  def union(other: OffsetRanges): OffsetRanges = OffsetRanges.normalize(ranges ++ other.ranges)

  /** How many offsets of `from until until` are in the set. */
  def countWithin(from: Long, until: Long): Long =
    ranges.iterator.map(r => math.max(0L, math.min(r.last + 1, until) - math.max(r.first, from))).sum

  /** The offsets of this set that are not in `other`. */
  def minus(other: OffsetRanges): OffsetRanges = {
    val out = Vector.newBuilder[OffsetRange]
    ranges.foreach { r =>
      var next = r.first
      other.ranges.iterator.dropWhile(_.last < r.first).takeWhile(_.first <= r.last).foreach { cut =>
        if (cut.first > next) out += OffsetRange(next, cut.first - 1)
        next = math.max(next, cut.last + 1)
      }
      if (next <= r.last) out += OffsetRange(next, r.last)
    }
    new OffsetRanges(out.result())
  }

  /** Drops offsets below `start` (records the group has already acknowledged for good). */
  def dropBelow(start: Long): OffsetRanges =
    new OffsetRanges(ranges.collect {
      case r if r.last >= start => if (r.first >= start) r else OffsetRange(start, r.last)
    })

  override def equals(o: Any): Boolean = o match {
    case other: OffsetRanges => ranges == other.ranges
    case _                   => false
  }
  override def hashCode: Int    = ranges.hashCode
  override def toString: String = ranges.map(r => s"${r.first}..${r.last}").mkString("[", ",", "]")
}

object OffsetRanges {
  val empty: OffsetRanges = new OffsetRanges(Vector.empty)

  def apply(ranges: Seq[OffsetRange]): OffsetRanges = normalize(ranges)

  /** From offsets in any order, duplicates allowed. */
  def ofOffsets(offsets: Iterable[Long]): OffsetRanges =
    normalize(offsets.iterator.map(o => OffsetRange(o, o)).toSeq)

  private def normalize(input: Seq[OffsetRange]): OffsetRanges = {
    val merged               = Vector.newBuilder[OffsetRange]
    var current: OffsetRange = null
    input.sortBy(_.first).foreach { r =>
      if (current == null) current = r
      else if (r.first <= current.last + 1) current = OffsetRange(current.first, math.max(current.last, r.last))
      else { merged += current; current = r }
    }
    if (current != null) merged += current
    new OffsetRanges(merged.result())
  }
}
