package io.github.kafkashare.spark.planning

import io.github.kafkashare.spark.offsets.{OffsetRange, OffsetRanges, TopicPartitionRanges}
import io.github.kafkashare.spark.planning.BatchDecision._
import org.scalatest.funsuite.AnyFunSuite

class BatchDecisionSuite extends AnyFunSuite {

  private val tp = ("orders", 0)

  private def pins(first: Long, last: Long) = TopicPartitionRanges(Map(tp -> OffsetRanges(Seq(OffsetRange(first, last)))))

  /** A stream that planned a batch before, at the same ends, which got nothing: every input "quiet". */
  private val quiet = Inputs(
    ends = Map(tp -> 100L),
    plannedEnds = Map(tp -> 100L),
    startOffsets = Map(tp -> 100L),
    pinned = TopicPartitionRanges.empty,
    firstRun = false,
    gotSome = false,
    fetchedWhileIdle = false,
    sinceLastPlanMs = 0,
    probeWaitMs = 15000,
    availableNow = None
  )

  test("a quiet stream runs no batch; any sign of records runs one") {
    assert(decide(quiet) == Skip)
    assert(decide(quiet.copy(firstRun = true)) == Run)
    assert(decide(quiet.copy(gotSome = true)) == Run, "the last batch got records: there may be more")
    assert(decide(quiet.copy(ends = Map(tp -> 101L))) == Run, "new records")
    assert(decide(quiet.copy(ends = Map(tp -> 7L))) == Run, "an end that went down: the topic was created again")
    assert(decide(quiet.copy(fetchedWhileIdle = true)) == Run, "an idle consumer's records are locked to it")
  }

  test("records that came back below the ends are probed for once the probe wait has passed, only where the pins have holes") {
    // The group's start offset is 40: 40..99 not all pinned, so records there may have come back.
    val holes = quiet.copy(startOffsets = Map(tp -> 40L), pinned = pins(40, 89))
    assert(decide(holes) == Skip, "the wait has not passed")
    assert(decide(holes.copy(sinceLastPlanMs = 15000)) == Probe)
    assert(decide(holes.copy(sinceLastPlanMs = 15000, pinned = pins(40, 99))) == Skip, "no hole: nothing can come back")
    // A partition the group never read (no start offset) is no hole: only a batch with new data reads it.
    assert(decide(holes.copy(sinceLastPlanMs = 15000, startOffsets = Map.empty)) == Skip)
  }

  test("AvailableNow runs while holes remain below its targets, and ends after three empty batches in a row") {
    val targets = Map(tp -> 100L)
    val below   = quiet.copy(startOffsets = Map(tp -> 50L), pinned = pins(50, 79), availableNow = Some(targets -> 0))
    assert(decide(below) == Run)
    assert(decide(below.copy(availableNow = Some(targets -> 2))) == Run)
    assert(decide(below.copy(availableNow = Some(targets -> AvailableNowEmptyBatches))) == Skip)
    assert(decide(below.copy(pinned = pins(50, 99))) == Skip, "everything below the targets is pinned")
    // Never read by the group: read from 0 to the target.
    assert(decide(below.copy(startOffsets = Map.empty, pinned = TopicPartitionRanges.empty)) == Run)
    // New data and idle fetches do not keep AvailableNow going: it would never end while producers write.
    assert(decide(below.copy(pinned = pins(50, 99), gotSome = true, fetchedWhileIdle = true, ends = Map(tp -> 500L))) == Skip)
    assert(decide(below.copy(pinned = pins(50, 99), firstRun = true)) == Run)
  }
}
