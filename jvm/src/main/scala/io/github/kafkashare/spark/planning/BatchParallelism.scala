package io.github.kafkashare.spark.planning

import io.github.kafkashare.spark.offsets.ShareSourceOffset
import io.github.kafkashare.spark.options.ShareSourceOptions
import org.apache.spark.internal.Logging

/**
 * Each micro-batch's read tasks: `kafka.share.parallelism`, or with `auto` the count [[ElasticParallelism]]
 * chooses from the backlog, up to `most`. A change of the count is said at INFO, with its reason.
 */
private[planning] final class BatchParallelism(options: ShareSourceOptions, most: Int, planning: BatchPlanning) extends Logging {

  private val elastic = options.elastic.map(bounds => new ElasticParallelism(bounds.min, most, bounds.drainMs))
  // The last batch the elastic count looked at: once per batch, not at every trigger. The run's first batch
  // is not learnt from: its read tasks made their consumers and joined the group, seconds a read task did not read.
  private var learntFrom = Option.empty[Long]

  /** The read tasks of the batch after `start`, once auto learnt from the batch that ended there. */
  def after(start: ShareSourceOffset): Int = elastic.fold(most) { e =>
    val last    = planning.lastBatch
    val sinceMs = (System.nanoTime - planning.plannedAt) / 1000000L // the batch before, from its planning on
    if (start.batch >= 0 && last.batch == start.batch && !learntFrom.contains(start.batch)) {
      if (learntFrom.nonEmpty) e.ran(start.tasks, last.records, sinceMs, planning.backlogNow)
      learntFrom = Some(start.batch)
    }
    val before = e.current
    val chosen = e.choose(planning.backlogNow, planning.arrivingPerSecond(last.records, sinceMs))
    if (chosen != before)
      logInfo(s"kafka-share: group '${options.groupId}': $chosen read tasks from this batch on (were $before): ${e.reason}")
    chosen
  }

  /** `parallelism` for the progress (the last batch's count, with auto), and with auto why. */
  def metrics: Map[String, String] =
    Map("parallelism" -> elastic.fold(most)(_.current).toString) ++ elastic.map(e => "parallelismReason" -> e.reason)
}
