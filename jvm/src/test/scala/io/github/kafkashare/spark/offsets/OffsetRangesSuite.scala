package io.github.kafkashare.spark.offsets

import org.scalatest.funsuite.AnyFunSuite

class OffsetRangesSuite extends AnyFunSuite {

  test("offsets in any order become sorted, merged ranges") {
    val r = OffsetRanges.ofOffsets(Seq(5L, 3, 4, 10, 12, 11, 3, 20))
    assert(r.ranges == Vector(OffsetRange(3, 5), OffsetRange(10, 12), OffsetRange(20, 20)))
    assert(r.count == 7)
  }

  test("contains finds members only") {
    val r = OffsetRanges(Seq(OffsetRange(0, 9), OffsetRange(20, 29), OffsetRange(100, 100)))
    assert(Seq(0L, 9, 20, 25, 29, 100).forall(r.contains))
    assert(Seq(-1L, 10, 19, 30, 99, 101).forall(o => !r.contains(o)))
    assert(!OffsetRanges.empty.contains(0))
  }

  test("overlaps: whether a span of offsets reaches into the set, and agrees with a lookup per offset") {
    val r = OffsetRanges(Seq(OffsetRange(10, 19), OffsetRange(30, 39)))
    assert(r.overlaps(0, 10) && r.overlaps(19, 25) && r.overlaps(0, 100) && r.overlaps(35, 35))
    assert(!r.overlaps(0, 9) && !r.overlaps(20, 29) && !r.overlaps(40, 100) && !OffsetRanges.empty.overlaps(0, 100))
    val random = new scala.util.Random(11)
    (1 to 200).foreach { _ =>
      val set   = OffsetRanges.ofOffsets(Seq.fill(20)(random.nextInt(200).toLong))
      val first = random.nextInt(200).toLong
      val last  = first + random.nextInt(20)
      assert(set.overlaps(first, last) == (first to last).exists(set.contains), s"$set $first..$last")
    }
  }

  test("union merges overlapping and adjacent ranges") {
    val a = OffsetRanges(Seq(OffsetRange(0, 9), OffsetRange(30, 39)))
    val b = OffsetRanges(Seq(OffsetRange(10, 15), OffsetRange(35, 50)))
    assert(a.union(b).ranges == Vector(OffsetRange(0, 15), OffsetRange(30, 50)))
  }

  test("minus removes offsets, splitting ranges, and agrees with a set difference") {
    val r   = OffsetRanges(Seq(OffsetRange(0, 9), OffsetRange(20, 29)))
    val cut = OffsetRanges.ofOffsets(Seq(0L, 5, 6, 9, 15, 25, 40))
    assert(r.minus(cut).ranges == Vector(OffsetRange(1, 4), OffsetRange(7, 8), OffsetRange(20, 24), OffsetRange(26, 29)))
    assert(r.minus(OffsetRanges.empty) == r && OffsetRanges.empty.minus(r).isEmpty && r.minus(r).isEmpty)
    val random = new scala.util.Random(7)
    (1 to 50).foreach { _ =>
      val a = Seq.fill(40)(random.nextInt(100).toLong).toSet
      val b = Seq.fill(40)(random.nextInt(100).toLong).toSet
      assert(OffsetRanges.ofOffsets(a).minus(OffsetRanges.ofOffsets(b)) == OffsetRanges.ofOffsets(a -- b))
    }
    val tp = TopicPartitionRanges(Map(("t", 0) -> r, ("t", 1) -> OffsetRanges.ofOffsets(Seq(3L))))
    assert(tp.minus(TopicPartitionRanges(Map(("t", 1) -> OffsetRanges.ofOffsets(Seq(3L))))) == TopicPartitionRanges(Map(("t", 0) -> r)))
  }

  test("dropBelow trims at the start offset") {
    val r = OffsetRanges(Seq(OffsetRange(0, 9), OffsetRange(20, 29)))
    assert(r.dropBelow(5).ranges == Vector(OffsetRange(5, 9), OffsetRange(20, 29)))
    assert(r.dropBelow(10).ranges == Vector(OffsetRange(20, 29)))
    assert(r.dropBelow(30).isEmpty)
  }

  test("per partition: union, trim, and partitions without a start offset are kept") {
    val a = TopicPartitionRanges(Map(("t", 0) -> OffsetRanges.ofOffsets(0L to 9L), ("t", 1) -> OffsetRanges.ofOffsets(Seq(5L))))
    val b = TopicPartitionRanges(Map(("t", 0) -> OffsetRanges.ofOffsets(10L to 12L), ("u", 0) -> OffsetRanges.ofOffsets(Seq(1L))))
    val u = a.union(b)
    assert(u.contains("t", 0, 12) && u.contains("u", 0, 1) && !u.contains("t", 1, 6))
    val trimmed = u.dropBelow(Map(("t", 0) -> 13L, ("t", 1) -> 0L))
    assert(trimmed.byPartition.keySet == Set(("t", 1), ("u", 0)))
  }

  test("holes: offsets of a window that are not in the set") {
    val r = TopicPartitionRanges(Map(("t", 0) -> OffsetRanges(Seq(OffsetRange(0, 9), OffsetRange(20, 29)))))
    assert(OffsetRanges(Seq(OffsetRange(0, 9), OffsetRange(20, 29))).countWithin(5, 25) == 10)
    assert(!r.hasHoles("t", 0, 0, 10) && !r.hasHoles("t", 0, 20, 30) && !r.hasHoles("t", 0, 5, 5))
    assert(r.hasHoles("t", 0, 0, 11) && r.hasHoles("t", 0, 9, 21) && r.hasHoles("t", 1, 0, 1))
  }
}
