package io.github.kafkashare.spark.planning

import scala.util.control.NonFatal

import org.apache.spark.internal.Logging

/**
 * `backlogAgeMs`: how old the oldest record the group still holds is. A thousand records of backlog can be
 * a second or a day behind; the count alone does not say which.
 *
 * The oldest record of a partition is the one at the group's start offset (everything below is acknowledged
 * for good); its timestamp is read by offset ([[ClusterView.recordTimestamps]]) at a batch's planning, for the
 * partitions that have a backlog only, and at most every `minIntervalMs`: one small fetch per partition, not
 * one per trigger. 0 as soon as a look finds no backlog.
 *
 * @param read the timestamps (epoch ms) of the records at these offsets; partitions it cannot read are left out
 */
private[planning] final class BacklogAge(
    read: Map[(String, Int), Long] => Map[(String, Int), Long],
    nowMs: () => Long = () => System.currentTimeMillis,
    minIntervalMs: Long = BacklogAge.MinIntervalMs
) extends Logging {

  @volatile private var ageMs = 0L
  // Bumped when the age is set here: a read run elsewhere that ends after it writes nothing.
  @volatile private var generation = 0L
  private var lastReadMs           = Option.empty[Long]
  // How a read runs: at once by default; real time hands it to its look-ahead's thread.
  private var run: (() => Unit) => Unit = body => body()

  /** Reads run by `runner` from now on (on another thread: the age then comes when the read ends). */
  def runIn(runner: (() => Unit) => Unit): Unit = run = runner

  def current: Long = ageMs

  /** A look at the cluster found no record available: nothing is old. */
  def noBacklog(): Unit = { generation += 1; ageMs = 0L }

  /** A batch is planned; `startOffsets` of the partitions with a backlog. */
  def planned(startOffsets: Map[(String, Int), Long]): Unit = {
    val now = nowMs()
    if (startOffsets.isEmpty) noBacklog()
    else if (lastReadMs.forall(now - _ >= minIntervalMs)) {
      lastReadMs = Some(now)
      generation += 1
      val readFor = generation
      run { () =>
        val stamps =
          try read(startOffsets)
          catch {
            case NonFatal(e) =>
              logInfo(s"kafka-share: could not read the oldest records' timestamps (${e.getMessage}); backlogAgeMs keeps its value")
              Map.empty[(String, Int), Long]
          }
        // Nothing read (a timeout): the previous age stands rather than a 0 that would say all is well.
        stamps.values.filter(_ >= 0).minOption.filter(_ => generation == readFor).foreach(oldest => ageMs = math.max(0L, now - oldest))
      }
    }
  }
}

private[planning] object BacklogAge {
  val MinIntervalMs = 5000L
}
