package io.github.kafkashare.spark.planning

import io.github.kafkashare.spark.offsets.{AcquisitionLog, ShareSourceOffset, SourceMarkers}
import io.github.kafkashare.spark.options.LockBudget
import io.github.kafkashare.spark.sparkinternals.CheckpointLayout
import org.apache.hadoop.fs.Path
import org.apache.spark.internal.Logging

/**
 * Two-phase commit and explicit mode acknowledge a batch's records after it commits, on the executors
 * that hold them. A query that ends (Trigger.AvailableNow, a stop) waits for that phase 2 of its last
 * committed batch, at most a lock duration: an application that stops its executors right after would
 * otherwise leave the records locked, to come back to the group (a delivery attempt spent) instead of
 * being acknowledged.
 */
private[planning] final class PhaseTwoWait(
    acquisitions: AcquisitionLog,
    markers: SourceMarkers,
    commitLogDir: Path,
    locks: LockBudget,
    renewLocks: Boolean
) extends Logging {

  /** Waits for phase 2 of `last` if it committed; `plannedAt` is when it was planned (System.nanoTime). */
  def await(last: ShareSourceOffset, plannedAt: Long): Unit =
    if (markers.exists(CheckpointLayout.entry(commitLogDir, last.batch))) {
      val holding = (0 until last.tasks).filter(t => acquisitions.read(last.batch, t).exists(_.runs.nonEmpty))
      // Without renewal, the watcher acknowledges within a lock of the batch's polls (from its planning);
      // with it, a batch may outlast that, and the watcher sees the commit at its next renewal round (from now).
      val deadline = (if (renewLocks) System.nanoTime else plannedAt) + locks.phaseTwoWaitMs(renewLocks) * 1000000L
      // A stop interrupts the query's thread; the wait must still happen, and the flag is kept.
      val interrupted = Thread.interrupted()
      try {
        var waiting = holding.filterNot(markers.acknowledged(last.batch, _))
        while (waiting.nonEmpty && System.nanoTime < deadline) {
          try Thread.sleep(50)
          catch { case _: InterruptedException => }
          waiting = waiting.filterNot(markers.acknowledged(last.batch, _))
        }
        if (waiting.nonEmpty) logWarning(s"kafka-share: batch ${last.batch}'s held records of task(s) " +
          s"${waiting.mkString(", ")} were not acknowledged within the lock duration (${locks.lockDurationMs} ms) after the query " +
          "ended; they come back to the group and, pinned, are dropped when this query runs again")
      } finally if (interrupted) Thread.currentThread.interrupt()
    }
}
