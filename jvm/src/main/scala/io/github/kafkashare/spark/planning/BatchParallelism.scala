package io.github.kafkashare.spark.planning

import io.github.kafkashare.spark.metrics.QueryTotals
import io.github.kafkashare.spark.offsets.ShareSourceOffset
import io.github.kafkashare.spark.options.ShareSourceOptions
import org.apache.spark.internal.Logging

/**
 * Each micro-batch's read tasks: `kafka.share.parallelism`, or with `auto` the count [[ElasticParallelism]]
 * chooses from the backlog, up to `most`, after it learnt from the batch before: its records, its read
 * tasks' time (`totals.taskMs`, summed as they end) and whether it was saturated. A change of the count is
 * said at INFO, with its reason.
 */
private[planning] final class BatchParallelism(options: ShareSourceOptions, most: Int, planning: BatchPlanning, totals: QueryTotals)
    extends Logging {

  private val elastic = options.elastic.map(bounds => new ElasticParallelism(bounds.min, most, bounds.drainMs))
  // Batches planned by this run: its first two are not learnt from (the one it starts from ran in an earlier
  // run, and its own first made its consumers and joined the group).
  private var plans    = 0
  private var realTime = false
  // The read tasks of the batch before the one that ended (each batch's own are in its offset).
  private var tasksBefore = 0

  /** The read tasks of the batch after `start`, once auto learnt from the batch that ended there. */
  def after(start: ShareSourceOffset): Int = elastic.fold(most) { e =>
    val last    = planning.lastBatch
    val sinceMs = (System.nanoTime - planning.plannedAt) / 1000000L
    if (plans >= 2 && last.batch == start.batch) {
      // A batch capped by maxRecordsPerTrigger counts: its tasks read until they had their share, and their time says how fast.
      val saturated = last.records < planning.backlogAtPlanning && start.tasks <= tasksBefore
      e.ran(last.records, totals.taskMs.sum, saturated)
    }
    val before = e.current
    val chosen = e.choose(planning.backlogNow, planning.arrivingPerSecond(last.records, sinceMs))
    if (chosen != before)
      logInfo(s"kafka-share: group '${options.groupId}': $chosen read tasks from this batch on (were $before): ${e.reason}")
    plans += 1
    tasksBefore = start.tasks
    chosen
  }

  /** Real time's read tasks: `most`, kept from batch to batch. */
  def forRealTime(): Int = { realTime = true; most }

  /** `parallelism` for the progress (the last batch's count, with auto), and with auto why. */
  def metrics: Map[String, String] = elastic match {
    case Some(_) if realTime =>
      Map("parallelism" -> most.toString, "parallelismReason" -> s"$most, the maximum: real time keeps its read tasks")
    case Some(e) => Map("parallelism" -> e.current.toString, "parallelismReason" -> e.reason)
    case None    => Map("parallelism" -> most.toString)
  }
}
