package io.github.kafkashare.spark.planning

import io.github.kafkashare.spark.metrics.Backlog

/** The group's backlog at the last look (every trigger), and when the last two batches were planned: the progress metrics. */
private[planning] final class BacklogHistory {

  private var now                      = Backlog.none
  private var atPlan: Option[Long]     = None
  private var atLastPlan: Option[Long] = None

  def looked(backlog: Backlog): Unit = now = backlog

  def planned(): Unit = {
    atLastPlan = atPlan
    atPlan = Some(now.total)
  }

  /** The backlog at the last look. */
  def total: Long = now.total

  /**
   * Records that came in a second since the last batch was planned, `sinceMs` ago: the backlog's change,
   * plus what that batch took of it (`consumed`).
   */
  def arrivingPerSecond(consumed: Long, sinceMs: Long): Double =
    atPlan.filter(_ => sinceMs > 0).fold(0.0)(before => math.max(0L, now.total - before + consumed) * 1000.0 / sinceMs)

  /** The backlog when the newest batch was planned, for the SQL tab. */
  def atPlanning: Long = atPlan.getOrElse(0L)

  def metrics: Map[String, String] = Map(
    "backlogRecords"              -> now.total.toString,
    "backlogRecordsByTopic"       -> now.render,
    "backlogChangeSinceLastBatch" -> atLastPlan.fold("0")(before => (now.total - before).toString)
  )
}
