package io.github.kafkashare.spark.planning

import io.github.kafkashare.spark.errors.ShareSourceErrors
import io.github.kafkashare.spark.offsets.{AcquisitionLog, ShareSourceOffset, TopicPartitionRanges}
import io.github.kafkashare.spark.options.{AcknowledgmentMode, ShareSourceOptions}
import io.github.kafkashare.spark.reader.{HandedOver, RealTimeTaskEnd}
import io.github.kafkashare.spark.sparkinternals.TaskSlots
import org.apache.spark.internal.Logging
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.connector.read.streaming.PartitionOffset

/**
 * Spark's real-time mode on the driver (docs/guide/real-time.md). A real-time batch has no end when it
 * starts: Spark runs its tasks until the trigger's duration is over, then hands the driver each task's
 * end and writes their merge to its offset log. So a batch is Spark's batch id and the log tasks it ran:
 *  - `parallelism` tasks at log indexes from `firstTask`: 0 in a batch's first run. Spark does not replay
 *    a real-time batch that did not commit (the query stopped or crashed during it): it runs a new batch,
 *    with the same id, from the end of the batch before. That run finds the earlier run's tasks in the
 *    acquisition log and takes the next indexes, and its task i seals and emits first the parts of each
 *    earlier task j with j % parallelism == i. The earlier run ACCEPTed its records: emitted again, none
 *    is lost. The end names every task of the batch (`tasks` is the log's width), so the next batch counts
 *    all of them pinned;
 *  - records the batch before pinned and did not emit (its end's `unemitted`) are spread over the tasks.
 */
private[planning] final class RealTimeBatches(group: String, parallelism: Int, acquisitions: AcquisitionLog) extends Logging {

  // The start and the end (without what the tasks leave unemitted) of the batch running now.
  private var running = Option.empty[(ShareSourceOffset, ShareSourceOffset)]

  /** Records the last batch's tasks pinned or emitted from the log. */
  @volatile var lastPinned = 0L

  def plan(
      start: ShareSourceOffset,
      batch: Long,
      pinned: TopicPartitionRanges,
      clusterId: String,
      topicIds: Map[String, String]
  ): RealTimeBatches.Plan = {
    val firstTask = acquisitions.partNames(batch).map(_._1).maxOption.fold(0)(last => (last / parallelism + 1) * parallelism)
    if (firstTask > 0)
      logInfo(s"kafka-share: group '$group': batch $batch runs again (an earlier run of it stopped before it committed); " +
        s"its tasks first emit what the earlier run's $firstTask task(s) pinned")
    val end = ShareSourceOffset(batch, firstTask + parallelism, pinned, clusterId, group, topicIds)
    running = Some(start -> end)
    val carried = HandedOver.spread(start.unemitted, parallelism)
    RealTimeBatches.Plan(end, firstTask, i => HandedOver(carried(i), (0 until firstTask).filter(_ % parallelism == i)))
  }

  /**
   * The batch's end from its tasks' ends. A batch that pinned and emitted nothing ends where it started:
   * Spark then sees no progress (processAllAvailable returns).
   */
  def end(taskEnds: Seq[PartitionOffset]): ShareSourceOffset = {
    val (start, end) = running.getOrElse(throw new IllegalStateException("a real-time batch ended that was not planned"))
    val ends = taskEnds.map {
      case e: RealTimeTaskEnd => e
      case other              => throw new IllegalStateException(s"not the end of a kafka-share read task: $other")
    }
    if (ends.size != parallelism)
      throw new IllegalStateException(s"real-time batch ${end.batch}: ${ends.size} of $parallelism read tasks reported their end")
    lastPinned = ends.map(_.pinned).sum
    val unemitted = ends.flatMap(_.unemitted)
    if (unemitted.nonEmpty)
      logDebug(
        s"kafka-share: batch ${end.batch} ended with ${unemitted.map(_.size).sum} pinned record(s) not emitted; the next batch emits them"
      )
    if (lastPinned == 0 && unemitted.isEmpty && end.tasks == parallelism) start else end.copy(unemitted = unemitted)
  }
}

private[planning] object RealTimeBatches extends Logging {

  /** The batch's end as planned, its first log task, and each task's work before it polls. */
  final case class Plan(end: ShareSourceOffset, firstTask: Int, work: Int => HandedOver)

  /**
   * What real time cannot hold, said at start: a mode that holds records until the batch commits (real
   * time has no foreachBatch, and its batch commits minutes later), maxRecordsPerTrigger (a real-time
   * batch reads until its time is up), and more read tasks than task slots (Spark does not check: the
   * tasks past the slots would start when the others end, with the batch's time up, and read nothing).
   */
  def check(options: ShareSourceOptions, parallelism: Int, spark: SparkSession): Unit = {
    if (options.holdsUntilCommit) throw options.mode match {
      case AcknowledgmentMode.Explicit(_) => ShareSourceErrors.realTimeHoldsRecords("kafka.share.acknowledgment.mode", "explicit")
      case AcknowledgmentMode.Implicit => ShareSourceErrors.realTimeHoldsRecords("kafka.share.exactly.once.strategy", options.strategy.name)
    }
    if (options.maxRecordsPerTrigger.nonEmpty) throw ShareSourceErrors.realTimeMaxRecords()
    TaskSlots.of(spark) match {
      case Some(slots) if parallelism > slots => throw ShareSourceErrors.realTimeTooFewSlots(parallelism, slots)
      case Some(_)                            =>
      case None =>
        logWarning(s"kafka-share: group '${options.groupId}': no executor has registered yet, so whether the application " +
          s"has task slots for the $parallelism real-time read tasks cannot be checked")
    }
  }
}
