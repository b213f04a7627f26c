package io.github.kafkashare.spark.planning

/**
 * `kafka.share.parallelism=auto`: how many read tasks the next micro-batch gets, from the backlog
 * (docs/guide/scaling.md). Any number of share consumers may read a partition, so the count is the
 * source's to choose at every batch.
 *
 * A read task's pace (records a second of a read task's time, which holds the sink's work on the rows too) is
 * learnt from saturated batches only: batches that took less than waited when they were planned (a batch capped
 * by maxRecordsPerTrigger too: its tasks read until they had their share), and not the first with more tasks
 * (new consumers join the group first). Another
 * batch only says that its tasks were enough: learnt from, it would make the pace what was asked, and the
 * count creep up. The next batch gets enough tasks to take what arrives and to drain what waits within
 * `drainMs`:
 * {{{ tasks = ceil((backlog / drainSeconds + arrivingPerSecond) / pace) }}}
 * bounded by `min` and `max`. Up at once; down only after `calmBatches` batches in a row wanted fewer, and
 * then to the most that any of them wanted, so that a pause inside a burst does not shrink the readers.
 * Before any pace is known, a backlog gets `max` tasks (the batch measures the pace) and none gets `min`.
 */
private[planning] final class ElasticParallelism(val min: Int, val max: Int, drainMs: Long, calmBatches: Int = 3) {
  require(1 <= min && min <= max, s"parallelism bounds $min to $max")
  require(drainMs > 0 && calmBatches >= 1)

  private var tasks      = min
  private var pace       = Option.empty[Double]
  private var wantedLess = List.empty[Int]
  private var why        = s"$min, the minimum: no batch ran yet"

  /** The read tasks of the batch planned last. */
  def current: Int = tasks

  /** Why the count is what it is, for the progress. */
  def reason: String = why

  /** What a read task took, records a second, once a batch that left a backlog measured it. */
  def recordsPerTaskSecond: Option[Double] = pace

  /** A batch ran: its read tasks took `records` in `taskMs` of their time, summed; `saturated`: see above. */
  def ran(records: Long, taskMs: Long, saturated: Boolean): Unit =
    if (saturated && taskMs > 0 && records > 0) {
      val seen = records * 1000.0 / taskMs
      pace = Some(pace.fold(seen)(before => (before + seen) / 2)) // the last batches, the newest weighing most
    }

  /**
   * The next batch's read tasks, for `backlog` records waiting now and `arrivingPerSecond` coming in.
   * Returns the count; [[reason]] says why.
   */
  def choose(backlog: Long, arrivingPerSecond: Double): Int = {
    val (wanted, because) = pace match {
      case None if backlog > 0 =>
        (max, s"$max, the maximum: a backlog of $backlog records, and no batch has measured a read task's pace yet")
      case None => (min, s"$min, the minimum: no backlog")
      case Some(p) =>
        val perSecond = backlog * 1000.0 / drainMs + math.max(0.0, arrivingPerSecond)
        val needed    = math.ceil(perSecond / p).toInt
        val bounded   = needed.max(min).min(max)
        val bound     = if (needed > max) " (the maximum)" else if (needed < min) " (the minimum)" else ""
        (
          bounded,
          s"$bounded$bound: a backlog of $backlog records and ${arrivingPerSecond.max(0).round} arriving a second, " +
            s"at ${p.round} records a second per read task, drained within ${drainMs / 1000.0} s"
        )
    }
    if (wanted >= tasks) {
      wantedLess = Nil
      why = because
      tasks = wanted
    } else {
      wantedLess = wanted :: wantedLess
      if (wantedLess.size >= calmBatches) {
        tasks = wantedLess.max
        why = s"$because; down after $calmBatches batches in a row that wanted fewer"
        wantedLess = Nil
      } else why = s"$tasks, kept: ${wantedLess.size} of $calmBatches batches in a row wanted fewer ($because)"
    }
    tasks
  }
}
