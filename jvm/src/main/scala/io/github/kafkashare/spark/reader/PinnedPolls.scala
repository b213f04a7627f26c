package io.github.kafkashare.spark.reader

import scala.util.control.NonFatal

import io.github.kafkashare.spark.ack.AcknowledgementPlan
import io.github.kafkashare.spark.consumer.{PooledShareConsumer, Uninterrupted}
import io.github.kafkashare.spark.errors.ShareSourceErrors
import io.github.kafkashare.spark.metrics.{ShareSourceMetrics => Metrics, TaskCounters}
import io.github.kafkashare.spark.offsets.AcquisitionEntry
import io.github.kafkashare.spark.options.Decision
import io.github.kafkashare.spark.runtime.TaskRuntime
import org.apache.kafka.clients.consumer.AcknowledgeType
import org.apache.spark.internal.Logging

/**
 * The records a fresh attempt of a read task acquires, one part per poll. For each poll, in the
 * order the delivery contract needs:
 *  1. poll (the first waits up to kafka.share.poll.timeout.ms for records, later ones briefly);
 *  2. give back records whose locks are too far spent to pin (a pause came between the fetch and
 *     now: another member may have them already); drop redeliveries of records pinned to an earlier
 *     batch, to a sibling task of this batch or to an earlier part of this task (exactly-once
 *     strategies); reject poison records;
 *  3. pin what is left: write it as the task's next part in the acquisition log (atomic,
 *     create-if-absent);
 *  4. only then acknowledge: ACCEPT (sent at once, without waiting for the answer), or, for two-phase
 *     commit and explicit mode, hand the consumer to the commit watcher, which ACCEPTs (or applies the
 *     decisions) once Spark's commit log has the batch;
 *  5. yield the part's records, by topic, partition and offset: the order a replay of the part has.
 * It polls again while the task is within kafka.share.read.duration.ms and the last poll suggests a
 * backlog (at least half of max.poll.records, or redeliveries, which brokers hand out few at a time):
 * a batch then pays Spark's per-batch cost once for
 * many polls' records, while a quiet stream's tasks still end after one poll. A consumer that holds
 * records until the commit cannot poll again (Kafka wants every record of a poll acknowledged first),
 * so those tasks poll once.
 * A failure before a part is pinned RELEASEs what that poll acquired. After, nothing is RELEASEd: the
 * records belong to this batch, and a retry replays them ([[AcknowledgementPlan]]). A record on its last
 * delivery attempt is never given back for its lock's age ([[PollClassification.pinnableWhenSpent]]).
 *
 * When it polls again, and how long a poll waits, is its [[PollSchedule]]'s: a micro-batch's budget, or
 * polls until Spark's deadline for the batch, where the rows of the part the task was emitting when the
 * time came are [[unemitted]] (the next batch emits them).
 *
 * @param replay what to yield when another attempt of this task pinned part 0 first: its records
 */
private[reader] final class PinnedPolls(
    partition: KafkaShareInputPartition,
    counters: TaskCounters,
    replay: () => Iterator[(PooledShareConsumer.Record, Int)],
    schedule: PollSchedule,
    runtime: TaskRuntime
) extends Iterator[(PooledShareConsumer.Record, Int)] with Logging {

  private type Record = PooledShareConsumer.Record

  // Spark began to stop the query: what this read acquired would belong to a batch that never commits.
  if (partition.query.markers.stopping) throw ShareSourceErrors.queryStopped(partition.batch)
  private val pool    = runtime.consumerPool
  private val clock   = new TaskClock(partition)
  private val sorting = new PollSorting(partition, counters, clock, runtime)
  // Borrowed until the task's last part is acknowledged; then null (back in the pool, or held).
  private var consumer: PooledShareConsumer = pool.borrow(partition.query.consumerKey)
  pool.watch(partition.query.consumerKey, partition.query.markers, partition.query.log)
  consumer.lastDeliveryAttempt = partition.deliveryLimit
  consumer.lastBatch = partition.batch
  if (consumer.newlyCreated) counters.add(Metrics.ConsumersCreated, 1)
  private var part    = 0
  private var emitted = 0L
  private var current = Iterator.empty[(Record, Int)]
  // When a held part went to the commit watcher (0: none): the task's summary is logged at its close.
  private var heldAt = 0L

  override def hasNext: Boolean = {
    while (!current.hasNext && consumer != null && !schedule.timeIsUp) current = nextPart()
    if (!current.hasNext && consumer != null) finish(System.nanoTime) // the schedule's time is up
    current.hasNext
  }

  /** The rows of the last pinned part not emitted yet (the schedule's time came between two of them). */
  def unemitted: Seq[(Record, Int)] = { val rest = current.toVector; current = rest.iterator; rest }

  /** Whether this attempt wrote the task's part 0 (with records, or empty at its end): the task's records are its own. */
  def wrotePart0: Boolean = ownsPart0
  private var ownsPart0   = false

  /** How many records this attempt pinned and emitted or has still to emit. */
  def pinnedRecords: Long = emitted

  override def next(): (Record, Int) = if (hasNext) current.next() else Iterator.empty.next()

  /** The task ends before its last part (Spark stopped reading, or a failure downstream). */
  def close(): Unit = Uninterrupted(closeNow())

  private def closeNow(): Unit = if (consumer == null && heldAt != 0L) {
    // Two-phase commit, explicit mode: the task's time ends here, after Spark took the held part's rows.
    clock.outsideNanos += System.nanoTime - heldAt
    heldAt = 0L
    logDebug(clock.summary(emitted))
  } else if (consumer != null) {
    try finish(System.nanoTime)
    catch {
      case NonFatal(e) =>
        logWarning("kafka-share: ending a read task failed; closing its consumer", e)
        val failed = consumer
        consumer = null
        if (failed != null) pool.discard(failed)
    }
  }

  private def nextPart(): Iterator[(Record, Int)] = {
    var pinned = false
    if (clock.lastReturn != 0) clock.outsideNanos += System.nanoTime - clock.lastReturn
    try {
      val poll      = pollOnce()
      val polledAt  = poll.acquiredAtNanos
      val plan      = sorting.sort(consumer, poll, limits)
      val pollAgain = plan.pollAgain || schedule.pollsUntilTheEnd
      if (plan.keep.isEmpty && (pollAgain || part > 0)) {
        // Nothing to pin from this poll. Part 0 is written, even empty, only when the task ends, so
        // that a retry replays the same (empty) task instead of polling anew.
        if (pollAgain) consumer.send() else finish(polledAt)
        return Iterator.empty
      }
      val kept = sorting.recheckLocks(consumer, plan.keep, polledAt)
      if (kept.isEmpty && plan.keep.nonEmpty) {
        if (schedule.pollsUntilTheEnd) consumer.send() else finish(polledAt)
        return Iterator.empty
      }
      val pinStart         = System.nanoTime
      val (ordered, entry) = PartEntry.of(kept)
      val (winner, ours)   = partition.query.log.writeIfAbsent(partition.batch, partition.task, entry, part)
      clock.pinNanos += System.nanoTime - pinStart
      pinned = ours
      if (ours && part == 0) ownsPart0 = true
      AcknowledgementPlan.forPart(ours, partition.query.holdUntilCommit, kept.nonEmpty) match {
        case AcknowledgementPlan.ForPart.GiveBack        => partTakenByAnother(kept, winner, polledAt)
        case AcknowledgementPlan.ForPart.HoldUntilCommit => holdUntilCommit(ordered, polledAt)
        case AcknowledgementPlan.ForPart.Accept          => acceptPart(ordered, entry, pollAgain, polledAt)
      }
    } catch {
      case NonFatal(e) =>
        abandon(pinned)
        throw e
    }
  }

  private def pollOnce(): PooledShareConsumer.Polled = {
    val pollStart = System.nanoTime
    val timeoutMs = schedule.pollTimeoutMs(first = part == 0 && emitted == 0, clock.budgetLeftMs)
    // Polling on with no topic (a pattern that matches none yet): a poll returns at once, so wait as a poll would.
    if (schedule.pollsUntilTheEnd && partition.topics.isEmpty) Thread.sleep(timeoutMs)
    val poll = consumer.poll(partition.topics, timeoutMs, waitForJoin = schedule.waitsForJoin)
    clock.polls += 1; clock.pollNanos += System.nanoTime - pollStart
    if (!poll.fromCarry) counters.add(Metrics.Acquired, poll.records.size)
    poll
  }

  /**
   * Another attempt pinned part 0 first, or a retry sealed the task: their parts are the task's. This
   * attempt is usually a zombie on an executor the driver gave up: carried, its records would wait for
   * a borrower that never comes, so they go back now.
   */
  private def partTakenByAnother(kept: Seq[Record], winner: AcquisitionEntry, polledAt: Long): Iterator[(Record, Int)] = {
    consumer.acknowledge(kept, AcknowledgeType.RELEASE)
    counters.add(Metrics.Released, kept.size)
    finish(polledAt)
    if (part == 0) replay()
    else {
      logInfo(s"kafka-share: batch ${partition.batch} task ${partition.task}: another attempt ended this task " +
        s"after part ${part - 1} (${if (winner.runs.isEmpty) "sealed" else "unexpected entry"}); stopping")
      Iterator.empty
    }
  }

  /** Two-phase-commit and explicit mode: the consumer goes to the commit watcher with the records held. */
  private def holdUntilCommit(ordered: Seq[Record], polledAt: Long): Iterator[(Record, Int)] = {
    consumer.commit() // the dropped and poison records; the kept ones stay held
    counters.add(Metrics.LockUsedPercent, clock.lockUsedPercent(polledAt))
    CommitHold.handOver(partition, consumer, clock.lockAgeMs(polledAt), runtime.commitWatcher)
    consumer = null
    emitted += ordered.size
    heldAt = System.nanoTime
    withCounts(ordered)
  }

  /** The part is pinned: ACCEPT it (sent without waiting), then poll again or end the task. */
  private def acceptPart(ordered: Seq[Record], entry: AcquisitionEntry, pollAgain: Boolean, polledAt: Long): Iterator[(Record, Int)] = {
    val ackStart = System.nanoTime
    consumer.acknowledge(ordered, AcknowledgeType.ACCEPT)
    clock.ackNanos += System.nanoTime - ackStart
    clock.lastReturn = System.nanoTime
    counters.add(Metrics.Accepted, ordered.size)
    sorting.pinnedOwnPart(entry)
    emitted += ordered.size
    part += 1
    if (pollAgain && ordered.nonEmpty) consumer.send() else finish(polledAt)
    withCounts(ordered)
  }

  /** A failure: what the consumer holds is ACCEPTed or RELEASEd ([[AcknowledgementPlan.onFailure]]). */
  private def abandon(pinned: Boolean): Unit = Uninterrupted {
    val failed = consumer
    consumer = null
    if (failed != null) {
      val decision = AcknowledgementPlan.onFailure(pinned)
      if (decision == Decision.Release) counters.add(Metrics.Released, failed.holding)
      try {
        if (decision == Decision.Accept) failed.acceptHeld() else failed.releaseHeld()
        pool.giveBack(failed)
      } catch { case NonFatal(_) => pool.discard(failed) }
    }
  }

  private def limits = partition.pollLimits(partition.maxRecords - emitted, consumer.maxPollRecords)

  private def withCounts(records: Seq[Record]): Iterator[(Record, Int)] =
    records.iterator.map(r => r -> PooledShareConsumer.deliveryCountOf(r))

  /** Sends the last acknowledgements, waiting for the answer, and gives the consumer back. */
  private def finish(polledAt: Long): Unit = {
    logDebug(clock.summary(emitted))
    if (part == 0 && emitted == 0) {
      // The task ends with nothing: an empty part 0 makes every later attempt replay nothing. Losing
      // the race is harmless here: the caller's replay path reads the winner.
      if (partition.query.log.writeIfAbsent(partition.batch, partition.task, AcquisitionEntry.empty)._2) ownsPart0 = true
    }
    // Until it is back in the pool the consumer stays ours: if the commit fails, the caller's error
    // handling RELEASEs or ACCEPTs what it holds.
    val refused = consumer.commit()
    refused.foreach { case (t, p, e) =>
      logWarning(s"the broker refused acknowledgements for $t-$p (${e.getMessage}); pinned records will be " +
        "redelivered and, with an exactly-once strategy, dropped")
    }
    counters.add(Metrics.LockUsedPercent, clock.lockUsedPercent(polledAt))
    val done = consumer
    consumer = null
    pool.giveBack(done)
  }
}
