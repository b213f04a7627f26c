package io.github.kafkashare.spark.planning

import java.util.concurrent.{Executors, Future, ScheduledExecutorService, TimeUnit}

import scala.util.control.NonFatal

import io.github.kafkashare.spark.consumer.Uninterrupted
import org.apache.spark.internal.Logging

/**
 * One look at the cluster for a batch: the topics the subscription names, where they end and their ids,
 * and the group's start offsets (with the broker's lag where it has one).
 */
private[planning] final case class ClusterLook(
    topics: Seq[String],
    now: TopicsNow,
    groupOffsets: Map[(String, Int), GroupPartitionOffset]
)

private[planning] object ClusterLook {

  /** A look at `topics` now (the micro-batch's, at each trigger). */
  def of(cluster: ClusterView, topics: Seq[String]): ClusterLook =
    if (topics.isEmpty) ClusterLook(topics, TopicsNow(Map.empty, Map.empty), Map.empty)
    else ClusterLook(topics, cluster.topicsNow(topics), cluster.groupOffsets())
}

/**
 * Real time's look at the cluster, taken while a batch runs instead of between two batches: a record sent
 * during the boundary waits for the next batch's tasks, so the boundary is the tail of the latency
 * (docs/internals/real-time-measurements.md). The look is started as a batch is planned and taken when the
 * next one is; it is then up to a batch old, which is safe for what the planning reads of it:
 *  - the group's start offsets only move forward: an old one keeps a few more pins, none too few;
 *  - the ends and the lag are the backlog's figures, up to a batch old in the progress.
 * Not for a topic deleted, or deleted and created again, since the look: its pins would hide the new topic's
 * records at the same offsets; nor for a pattern's topics (a group that starts at the latest offset would skip
 * what a new topic got meanwhile). So the planning first asks the topics' ids (one call, not the five of a
 * look; with a pattern, also the topics it matches): ids that changed, a topic gone or new, a look that
 * failed, or a subscription that matched no topic give a look now, as at every micro-batch.
 *
 * The look is made `delayMs` after the batch was planned, not at once: the batch's read tasks start then, and
 * on a small machine the look's calls would take the cores their first polls need. A batch shorter than that
 * has its look made at the boundary.
 *
 * The check is made as the batch's tasks end ([[batchEnded]]), with the read of their pins, not when the next
 * batch is planned: Spark writes its logs and plans the next batch's query meanwhile (30 to 60 ms on 2 cores).
 * A check older than `recheckAfterMs` when the next batch is planned (Spark's logs were slow to write) is made
 * again then, so a topic deleted and created again is missed only in the moments before the tasks start,
 * as when the check was made at the planning.
 */
private[planning] final class LookAhead(
    cluster: ClusterView,
    group: String,
    patterned: Boolean,
    delayMs: Long = LookAhead.DelayMs,
    recheckAfterMs: Long = LookAhead.RecheckAfterMs
) extends AutoCloseable with Logging {

  private val executor: ScheduledExecutorService = Executors.newSingleThreadScheduledExecutor { (task: Runnable) =>
    val thread = new Thread(task, s"kafka-share look-ahead '$group'")
    thread.setDaemon(true)
    thread
  }
  private var ahead = Option.empty[Future[ClusterLook]]
  // The look ahead, checked at the batch's end, and when (System.nanoTime).
  private var checked = Option.empty[Future[Option[(ClusterLook, Long)]]]

  /** Starts the look for the next batch, `delayMs` from now. */
  def start(): Unit =
    ahead = Some(executor.schedule(() => ClusterLook.of(cluster, cluster.resolveTopics()), delayMs, TimeUnit.MILLISECONDS))

  /** Runs `body` on the look-ahead's thread (the backlog's age: a fetch), `delayMs` from now. */
  def inBackground(body: () => Unit): Unit = executor.schedule((() => body()): Runnable, delayMs, TimeUnit.MILLISECONDS)

  /**
   * The batch's tasks ended: `alongside` (the read of what they pinned) and the check of the look taken ahead
   * run now on the look-ahead's thread, while Spark goes on to the next batch. A failure of `alongside` is the
   * planning's to meet: it reads again.
   */
  def batchEnded(alongside: () => Unit): Unit = {
    val look = ahead
    ahead = None
    checked = Some(executor.submit { () =>
      try alongside()
      catch { case NonFatal(e) => logDebug(s"kafka-share: group '$group': a read at the batch's end failed; the planning reads again", e) }
      checkedLook(look).map(_ -> System.nanoTime) // on this thread: the look has run, or not begun (then it is dropped)
    })
  }

  /** The look for the batch planned now: the one taken ahead while its topics keep their ids, else one now. */
  def take(): ClusterLook = {
    val valid = checked match {
      case Some(check) =>
        waitFor(check, "the check at the batch's end").flatten.filter { case (look, at) =>
          (System.nanoTime - at) / 1000000L <= recheckAfterMs || current(look)
        }.map(_._1)
      case None => checkedLook(ahead)
    }
    ahead = None
    checked = None
    valid.getOrElse(ClusterLook.of(cluster, cluster.resolveTopics()))
  }

  // A look not begun yet (a batch shorter than the delay) is dropped: one at the boundary instead.
  private def checkedLook(look: Option[Future[ClusterLook]]): Option[ClusterLook] =
    look.filterNot(_.cancel(false)).flatMap(waitFor(_, "the look at the cluster made during the batch")).filter(current)

  // Not interrupted on a timeout: the check may be reading the checkpoint, which an interrupt can leave broken.
  private def waitFor[T](future: Future[T], what: String): Option[T] =
    try Some(future.get(ClusterAccess.TimeoutMs + 5000L, TimeUnit.MILLISECONDS))
    catch {
      case NonFatal(e) =>
        future.cancel(false)
        logInfo(s"kafka-share: group '$group': $what failed (${e.getMessage}); looking now")
        None
    }

  // The topics keep their ids; a pattern's still match the same topics (a new one is read from this batch on,
  // not the next: a group starting at the latest offset would skip what it was given meanwhile).
  private def current(look: ClusterLook): Boolean =
    look.topics.nonEmpty && (try cluster.topicIds(look.topics) == look.now.ids && (!patterned || cluster.resolveTopics() == look.topics)
    catch { case NonFatal(_) => false })

  /** Ends the thread, waiting a moment for a look under way: the stop closes the cluster's clients next. */
  override def close(): Unit = Uninterrupted {
    executor.shutdownNow()
    executor.awaitTermination(5, TimeUnit.SECONDS)
  }
}

private[planning] object LookAhead {

  /** How long after a batch is planned its successor's look is made. */
  val DelayMs = 1000L

  /** How old a check made at a batch's end may be when the next batch is planned. */
  val RecheckAfterMs = 200L
}
