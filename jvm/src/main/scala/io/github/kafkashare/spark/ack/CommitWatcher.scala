package io.github.kafkashare.spark.ack

import java.util.concurrent.atomic.AtomicLong
import java.util.concurrent.{ConcurrentHashMap, ConcurrentLinkedQueue, TimeUnit}

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import io.github.kafkashare.spark.runtime.JvmResources
import io.github.kafkashare.spark.ack.AcknowledgementPlan.AtCheck
import io.github.kafkashare.spark.consumer.{Clock, ConsumerKey, PooledShareConsumer, ShareConsumerPool}
import io.github.kafkashare.spark.offsets.{DecisionLog, SerializableHadoopConf, SourceMarkers}
import io.github.kafkashare.spark.options.Decision
import io.github.kafkashare.spark.offsets.store.CheckpointStore
import org.apache.hadoop.fs.Path
import org.apache.spark.internal.Logging

/**
 * Phase 2 of two-phase commit and of explicit acknowledgement, on the executor that holds the records.
 *
 * A read task pins its records (phase 1, the acquisition log) and hands its consumer, still holding
 * them, to this watcher. The watcher checks Spark's commit log: once `commits/<batch>` exists the
 * sink has the batch, and the consumer acknowledges (two-phase commit: ACCEPT; explicit mode: the
 * decisions foreachBatch gave, or the default) and goes back to the pool. It does not wait for the
 * next batch, which an idle stream or a stop may never bring.
 *
 * Where the cluster can renew a lock (RENEW, Kafka 4.2+, [[Renewal]]), the watcher renews the held
 * records' locks every half lock duration while the commit has not come, for as long as the batch
 * runs; it stops when the query's `stopped` marker appears (Spark stops a query's sources whether it
 * ends by a stop or by a failure) and when the JVM dies, so no lock outlives its query by more than one
 * lock duration. A renewal the broker refuses ends the hold as below.
 *
 * If the commit does not come before the locks near their end (and cannot be renewed), the batch has
 * failed or is too slow: two-phase commit ACCEPTs, explicit mode RELEASEs ([[AcknowledgementPlan]] says why).
 *
 * One watcher per JVM serves every query ([[CommitWatcher.holdUntilCommitted]]); tests build their own
 * with a clock they move by hand and call [[checkHolds]] themselves.
 *
 * @param clock dates the holds' deadlines
 * @param pool  where a consumer goes back after phase 2
 */
final class CommitWatcher(clock: Clock, pool: ShareConsumerPool) extends Logging {
  import CommitWatcher._

  private final case class Hold(
      consumer: PooledShareConsumer,
      commitFile: Path,
      conf: SerializableHadoopConf,
      deadlineNanos: Long,
      renewal: Option[Renewal],
      explicit: Option[ExplicitDecisions],
      done: DoneMark,
      renewals: Int = 0
  ) {
    // When the query's stopped marker is next looked up (only the watcher's thread reads and writes it).
    var nextStopCheckNanos: Long = 0L
  }

  private final class Counters { val accepted, released, rejected = new AtomicLong }

  private val holds  = new ConcurrentLinkedQueue[Hold]()
  private val counts = new ConcurrentHashMap[ConsumerKey, Counters]()

  /**
   * Holds `consumer` (with its acquired records) until `commitFile` exists or `maxHoldMs` passes; with a
   * `renewal`, `maxHoldMs` is when the locks are first renewed, and the hold lasts until the commit comes
   * or the query stops.
   */
  def holdUntilCommitted(
      consumer: PooledShareConsumer,
      commitFile: Path,
      conf: SerializableHadoopConf,
      maxHoldMs: Long,
      renewal: Option[Renewal],
      explicit: Option[ExplicitDecisions],
      done: DoneMark
  ): Unit = {
    pool.expectBack(consumer)
    holds.add(Hold(consumer, commitFile, conf, clock.nanoTime() + TimeUnit.MILLISECONDS.toNanos(maxHoldMs), renewal, explicit, done))
  }

  /** Takes the acknowledgements made for `key` since the last call, for a read task to report. */
  def takeCounts(key: ConsumerKey): Counts = Option(counts.get(key)).fold(Counts(0, 0, 0)) { c =>
    Counts(c.accepted.getAndSet(0), c.released.getAndSet(0), c.rejected.getAndSet(0))
  }

  /** Batches held now, for tests and metrics. */
  def holding: Int = holds.size

  /**
   * One round: every hold whose commit came, or whose deadline passed, gets its phase 2; a hold with a
   * renewal is renewed at its deadline instead, and ends early when its query stopped
   * ([[AcknowledgementPlan.atCheck]] decides which).
   */
  def checkHolds(): Unit = holds.asScala.toList.foreach { hold =>
    try {
      val committed = CheckpointStore.of(hold.commitFile, hold.conf.value).exists(hold.commitFile)
      val now       = clock.nanoTime()
      val explicit  = hold.explicit.nonEmpty
      AcknowledgementPlan.atCheck(
        committed,
        late = now > hold.deadlineNanos,
        stopped = !committed && queryStopped(hold, now),
        renewable = hold.renewal.nonEmpty,
        explicit
      ) match {
        case AtCheck.Wait           => ()
        case AtCheck.ApplyDecisions =>
          // The decisions are read before the hold is let go: if that read fails, the next check retries.
          val decide = hold.explicit.map(decider).getOrElse((_: (String, Int, Long)) => Decision.Accept)
          holds.remove(hold)
          acknowledge(hold, decide, keep = true)
          markDone(hold)
        case AtCheck.Renew          => if (!renew(hold)) giveUp(hold, AcknowledgementPlan.renewalFailed(explicit))
        case giving: AtCheck.GiveUp => giveUp(hold, giving)
      }
    } catch {
      case NonFatal(e) => logWarning(s"checking ${hold.commitFile} failed; will retry", e)
    }
  }

  private def giveUp(hold: Hold, giving: AtCheck.GiveUp): Unit = {
    holds.remove(hold)
    logWarning(
      s"batch commit ${hold.commitFile}: ${giving.why}; ${giving.instead.name.toUpperCase}ing its ${hold.consumer.holding} held records now."
    )
    acknowledge(hold, _ => giving.instead, keep = giving.poolConsumer)
    markDone(hold)
  }

  /**
   * Whether the query of a renewed hold stopped (its `stopped` marker), looked up every few seconds:
   * a stopped query's held records must go back within a lock, not wait for the next renewal. A look-up
   * that fails counts as not stopped (the hold is renewed, not dropped).
   */
  private def queryStopped(hold: Hold, now: Long): Boolean =
    hold.renewal.nonEmpty && now >= hold.nextStopCheckNanos && {
      hold.nextStopCheckNanos = now + StopCheckNanos
      try hold.done.markers.stopped
      catch { case NonFatal(_) => false }
    }

  /**
   * Renews the locks of a hold whose commit has not come and holds it for another half lock. Failed when
   * the broker refused a partition's renewal (the records of such a partition are no longer this
   * consumer's to acknowledge) or the renewal did not complete: false.
   */
  private def renew(hold: Hold): Boolean = {
    val renewal = hold.renewal.get
    val refused =
      try hold.consumer.renewHeld(renewal.commitTimeoutMs, renewal.pollBackMs)
      catch { case NonFatal(e) => Seq(("-", -1, e)) }
    if (refused.nonEmpty) {
      refused.foreach { case (t, p, e) =>
        logWarning(s"kafka-share: renewing the locks of ${hold.commitFile.getName}'s held records of $t-$p failed " +
          s"(${e.getMessage}); their locks run out within a lock duration")
      }
      false
    } else {
      if (hold.renewals == 0)
        logInfo(s"kafka-share: batch commit ${hold.commitFile} is not there yet; renewing the locks of its " +
          s"${hold.consumer.holding} held records every ${renewal.everyMs} ms until it is")
      holds.remove(hold)
      holds.add(hold.copy(deadlineNanos = clock.nanoTime() + TimeUnit.MILLISECONDS.toNanos(renewal.everyMs), renewals = hold.renewals + 1))
      true
    }
  }

  // After phase 2, whether the broker took it or not: the driver waits for it, not for success.
  private def markDone(hold: Hold): Unit =
    try hold.done.markers.markAcknowledged(hold.done.batch, hold.done.task)
    catch { case NonFatal(e) => logWarning(s"could not mark batch ${hold.done.batch} task ${hold.done.task} acknowledged", e) }

  private def decider(explicit: ExplicitDecisions): ((String, Int, Long)) => Decision = {
    val decided = explicit.log.decisions(explicit.batch).getOrElse(Map.empty)
    AcknowledgementPlan.decisionOf(decided, explicit.default)
  }

  private def acknowledge(hold: Hold, decide: ((String, Int, Long)) => Decision, keep: Boolean): Unit = {
    val consumer = hold.consumer
    try {
      val (made, refused) = consumer.decideHeld(decide)
      refused.foreach { case (t, p, e) =>
        logWarning(s"the broker refused the acknowledgements of ${hold.commitFile.getName}'s held records of $t-$p " +
          s"(${e.getMessage}): their locks ran out first; they will be delivered again and, pinned, dropped by this query")
      }
      val c = counts.computeIfAbsent(consumer.key, _ => new Counters)
      c.accepted.addAndGet(made.getOrElse(Decision.Accept, 0).toLong)
      c.released.addAndGet(made.getOrElse(Decision.Release, 0).toLong)
      c.rejected.addAndGet(made.getOrElse(Decision.Reject, 0).toLong)
      if (keep) pool.giveBack(consumer) else pool.discard(consumer)
    } catch {
      case NonFatal(e) =>
        // The records are pinned: if the broker did not take the acknowledgement, they come back and
        // the exactly-once strategies drop them; otherwise they are emitted again (at least once).
        logWarning("acknowledging a held batch failed; its records will be delivered again", e)
        pool.discard(consumer)
    }
  }
}

object CommitWatcher {

  /**
   * Held records' locks are renewed (RENEW) every half lock duration: the broker restarts a lock when it
   * takes the renewal, so half a lock is left for a renewal that is slow to arrive.
   */
  final case class Renewal(lockDurationMs: Long) {
    def everyMs: Long = lockDurationMs / 2

    // One watcher renews every hold of the JVM in turn: a slow broker must not hold up the others past their margin.
    def commitTimeoutMs: Long = math.min(30000L, everyMs / 2)
    def pollBackMs: Long      = math.min(10000L, everyMs / 4)
  }

  private val StopCheckNanos = TimeUnit.SECONDS.toNanos(2)

  /** What an explicit-mode hold applies at commit. */
  final case class ExplicitDecisions(log: DecisionLog, batch: Long, default: Decision)

  /** Where phase 2 of task `task` of `batch` is said to be done (the driver waits for it at the end). */
  final case class DoneMark(markers: SourceMarkers, batch: Long, task: Int)

  /** Acknowledgements made here, per query (consumer key), that no read task of it has reported yet. */
  final case class Counts(accepted: Long, released: Long, rejected: Long)

  // This JVM's watcher ([[io.github.kafkashare.spark.runtime.JvmResources]] owns it), started by the first hold.
  private def shared: CommitWatcher = JvmResources.commitWatcher

  def holdUntilCommitted(
      consumer: PooledShareConsumer,
      commitFile: Path,
      conf: SerializableHadoopConf,
      maxHoldMs: Long,
      renewal: Option[Renewal],
      explicit: Option[ExplicitDecisions],
      done: DoneMark
  ): Unit =
    shared.holdUntilCommitted(consumer, commitFile, conf, maxHoldMs, renewal, explicit, done)

  /** What this JVM's watcher acknowledged for `key` since the last call (nothing before its first hold). */
  def takeCounts(key: ConsumerKey): Counts = JvmResources.commitWatcherIfStarted.fold(Counts(0, 0, 0))(_.takeCounts(key))
}
