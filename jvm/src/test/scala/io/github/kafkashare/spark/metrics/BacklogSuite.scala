package io.github.kafkashare.spark.metrics

import io.github.kafkashare.spark.offsets.{OffsetRange, OffsetRanges, TopicPartitionRanges}
import org.scalatest.funsuite.AnyFunSuite

class BacklogSuite extends AnyFunSuite {

  private def pins(entries: ((String, Int), Seq[(Long, Long)])*) =
    TopicPartitionRanges(entries.map { case (tp, rs) => tp -> OffsetRanges(rs.map { case (a, b) => OffsetRange(a, b) }) }.toMap)

  test("end minus the group's start offset, minus what this query pinned above it, per topic") {
    val ends   = Map(("a", 0) -> 100L, ("a", 1) -> 50L, ("b", 0) -> 10L)
    val starts = Map(("a", 0) -> 40L, ("a", 1) -> 50L, ("b", 0) -> 0L)
    // a-0: 60 above the start, 15 of them pinned (40..49 and 90..94); pins below the start do not count.
    val pinned  = pins(("a", 0) -> Seq((30L, 49L), (90L, 94L)), ("b", 0) -> Seq((0L, 9L)))
    val backlog = Backlog.of(ends, starts, pinned)
    assert(backlog.byTopic == Map("a" -> 45L, "b" -> 0L))
    assert(backlog.total == 45L)
    assert(backlog.render == "a=45,b=0")
  }

  test("a partition the group never read counts nothing: where reading starts is the group's reset policy") {
    assert(Backlog.of(Map(("a", 0) -> 100L), Map.empty, TopicPartitionRanges.empty).total == 0L)
  }
}
