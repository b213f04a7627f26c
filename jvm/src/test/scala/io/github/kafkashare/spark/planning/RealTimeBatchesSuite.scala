package io.github.kafkashare.spark.planning

import io.github.kafkashare.spark.UnitTestDirs
import io.github.kafkashare.spark.offsets._
import io.github.kafkashare.spark.reader.RealTimeTaskEnd
import org.apache.hadoop.conf.Configuration
import org.scalatest.funsuite.AnyFunSuite

/** Real-time batches on the driver: which log tasks a run takes, what each emits first, and the batch's end. */
class RealTimeBatchesSuite extends AnyFunSuite {

  private def log() = new AcquisitionLog(UnitTestDirs.create("rt").toString, new SerializableHadoopConf(new Configuration()))

  private val pinned = TopicPartitionRanges(Map(("t", 0) -> OffsetRanges(Seq(OffsetRange(0, 9)))))
  private val start  = ShareSourceOffset(4, 2, TopicPartitionRanges.empty, "c", "g", Map("t" -> "id"))

  private def entry(first: Long, last: Long) = AcquisitionEntry(Seq(AcquiredRun("t", 0, first, last, 1)))

  test("a batch's first run takes log tasks 0 until parallelism and has nothing to emit first") {
    val plan = new RealTimeBatches("g", 3, log()).plan(start, 5, pinned, "c", Map("t" -> "id"))
    assert(plan.firstTask == 0)
    assert(plan.end == ShareSourceOffset(5, 3, pinned, "c", "g", Map("t" -> "id")))
    assert((0 until 3).map(plan.work).forall(w => w.carried.isEmpty && w.earlierRunTasks.isEmpty))
  }

  test("a batch run again takes the next log tasks, and task i replays the earlier tasks j with j % parallelism == i") {
    val acquisitions = log()
    acquisitions.writeIfAbsent(5, 0, entry(0, 4))
    acquisitions.writeIfAbsent(5, 2, entry(5, 9)) // an earlier run with parallelism 3: task 2
    val plan = new RealTimeBatches("g", 2, acquisitions).plan(start, 5, pinned, "c", Map.empty)
    assert(plan.firstTask == 4, "the earlier run's task 2 lies in the second block of two")
    assert(plan.end.tasks == 6, "the end names every task of the batch, the earlier run's too")
    assert(plan.work(0).earlierRunTasks == Seq(0, 2))
    assert(plan.work(1).earlierRunTasks == Seq(1, 3))
  }

  test("what the batch before did not emit is spread over the tasks") {
    val left   = (0 until 5).map(i => AcquiredRun("t", 1, i * 10L, i * 10L + 1, 1))
    val plan   = new RealTimeBatches("g", 2, log()).plan(start.copy(unemitted = left), 5, pinned, "c", Map.empty)
    val spread = (0 until 2).map(plan.work(_).carried)
    assert(spread.flatten.sortBy(_.first) == left)
    assert(spread.map(_.size) == Seq(3, 2))
  }

  test("the end carries what the tasks did not emit; a batch that did nothing ends where it started") {
    val batches = new RealTimeBatches("g", 2, log())
    batches.plan(start, 5, pinned, "c", Map.empty)
    val left = Seq(AcquiredRun("t", 0, 3, 4, 1))
    assert(batches.end(Seq(RealTimeTaskEnd(0, 5, left), RealTimeTaskEnd(1, 0, Nil))) ==
      ShareSourceOffset(5, 2, pinned, "c", "g", Map.empty, unemitted = left))
    assert(batches.lastPinned == 5)
    batches.plan(start, 6, pinned, "c", Map.empty)
    assert(batches.end(Seq(RealTimeTaskEnd(0, 0, Nil), RealTimeTaskEnd(1, 0, Nil))) eq start)
  }

  test("a batch whose tasks did not all report is refused, not ended short") {
    val batches = new RealTimeBatches("g", 2, log())
    batches.plan(start, 5, pinned, "c", Map.empty)
    val e = intercept[IllegalStateException](batches.end(Seq(RealTimeTaskEnd(0, 1, Nil))))
    assert(e.getMessage.contains("1 of 2 read tasks"))
  }
}
