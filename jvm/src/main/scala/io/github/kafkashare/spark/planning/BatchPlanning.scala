package io.github.kafkashare.spark.planning

import io.github.kafkashare.spark.metrics.{Backlog, QueryTotals}
import io.github.kafkashare.spark.offsets.{AcquisitionEntry, AcquisitionLog, DecisionLog, ShareSourceOffset, TopicPartitionRanges}
import io.github.kafkashare.spark.options.ShareSourceOptions

/**
 * The planning step both modes share, before a batch after `start` gets its read tasks: what the batches
 * before pinned (not to emit again), the warning of records on their last attempt, the topics now, where
 * they end and the backlog; then, once a batch is planned, the figures that count from it. A micro-batch
 * then decides whether to run at all ([[BatchDecision]]); a real-time batch always runs ([[RealTimePlanning]]).
 */
private[planning] final class BatchPlanning(
    options: ShareSourceOptions,
    cluster: ClusterView,
    settings: StreamSettings,
    acquisitions: AcquisitionLog,
    decisions: DecisionLog,
    totals: QueryTotals
) {

  private val previous      = new PreviousBatches(acquisitions, decisions, options.mode)
  val identity              = new OffsetIdentity(options, cluster, acquisitions)
  private val deliveryLimit = new DeliveryLimitWatch(cluster, settings.initialDeliveryLimit, totals)
  private val backlog       = new BacklogHistory
  private val backlogAge    = new BacklogAge(cluster.recordTimestamps)
  // The group's start offsets of the partitions with a backlog, at the last look: where backlogAge reads.
  private var oldestHeld = Map.empty[(String, Int), Long]

  // The topics of the last planned batch: its read tasks subscribe to them.
  private var resolved    = cluster.resolveTopics()
  def topics: Seq[String] = resolved

  /** When the last batch was planned (System.nanoTime). */
  var plannedAt: Long = System.nanoTime

  /** The figures of the last batch of this source that ran. */
  var lastBatch: BatchStats = BatchStats(0, 0, 0)

  /** The group's delivery count limit, as last read. */
  def deliveryLimitNow: Option[Int] = deliveryLimit.current

  /** The batches before `start`: their entries and what was released of them. */
  def previousOf(start: ShareSourceOffset): (Seq[AcquisitionEntry], TopicPartitionRanges) = previous.of(start)

  /** Before a look: warns of records on their last delivery attempt, and resolves the topics again (a pattern's may have changed). */
  def refreshTopics(): Unit = {
    deliveryLimit.warnOfLastAttempts()
    resolved = cluster.resolveTopics()
  }

  /** Real time: the topics of a look taken ahead ([[LookAhead]]), instead of resolving them again. */
  def useTopicsOf(look: ClusterLook): Unit = {
    deliveryLimit.warnOfLastAttempts()
    resolved = look.topics
  }

  /** Real time: the backlog's age is read on the look-ahead's thread, not while Spark waits for the batch's tasks. */
  def readBacklogAgeWith(lookAhead: LookAhead): Unit = backlogAge.runIn(lookAhead.inBackground)

  /** What a batch after `start` must not emit again, and where the topics end (the backlog noted). */
  def look(start: ShareSourceOffset, entries: Seq[AcquisitionEntry], released: TopicPartitionRanges): Looked = {
    identity.check(start)
    lookedFrom(start, entries, released, ClusterLook.of(cluster, resolved))
  }

  /** The same from a look at the cluster already taken. */
  def look(start: ShareSourceOffset, entries: Seq[AcquisitionEntry], released: TopicPartitionRanges, seen: ClusterLook): Looked = {
    identity.check(start)
    lookedFrom(start, entries, released, seen)
  }

  private def lookedFrom(start: ShareSourceOffset, entries: Seq[AcquisitionEntry], released: TopicPartitionRanges, seen: ClusterLook) = {
    val now          = seen.now
    val ends         = now.ends
    val groupOffsets = seen.groupOffsets
    val startOffsets = groupOffsets.map { case (tp, o) => tp -> o.start }
    val pinned = identity.withoutRecreatedTopics(
      AcquisitionEntry.offsetsOf(entries, start.pinned).minus(released).dropBelow(startOffsets),
      start,
      now.ids
    )
    val available =
      if (settings.features.brokerLag.available) Backlog.fromBroker(ends, groupOffsets.map { case (tp, o) => tp -> o.brokerLag })
      else Backlog.of(ends, startOffsets, pinned)
    backlog.looked(available)
    oldestHeld = startOffsets.filter { case (tp, _) => available.partitionsWithRecords(tp) }
    if (oldestHeld.isEmpty) backlogAge.noBacklog()
    Looked(ends, startOffsets, pinned, now)
  }

  /** No topic to look at (a pattern that matches none yet): no backlog. */
  def noTopic(): Unit = {
    backlog.looked(Backlog.none)
    oldestHeld = Map.empty
    backlogAge.noBacklog()
  }

  /**
   * A batch after `start` is planned with `pinned` not to emit: the figures that count per batch start
   * again. Gives the topic ids its offset keeps: those of topics still pinned stay recorded while they are
   * gone (a pattern's topic deleted), so that when one comes back under its name, the new id tells its
   * records from the pinned ones.
   */
  def planned(start: ShareSourceOffset, pinned: TopicPartitionRanges, ids: Map[String, String]): Map[String, String] = {
    plannedAt = System.nanoTime
    backlog.planned()
    backlogAge.planned(oldestHeld)
    totals.resetLastBatch()
    deliveryLimit.refresh()
    start.topicIds.filter { case (t, _) => pinned.byPartition.keysIterator.exists(_._1 == t) } ++ ids
  }

  /** The backlog at the last look, and what came in a second since the last batch was planned (it took `consumed`). */
  def backlogNow: Long                                         = backlog.total
  def arrivingPerSecond(consumed: Long, sinceMs: Long): Double = backlog.arrivingPerSecond(consumed, sinceMs)

  /** The backlog when the newest batch was planned. */
  def backlogAtPlanning: Long = backlog.atPlanning

  /** The backlog's figures for the progress ([[BacklogHistory]]). */
  def backlogMetrics: Map[String, String] = backlog.metrics

  /** How old the oldest record the group still holds is ([[BacklogAge]]). */
  def backlogAgeMs: Long = backlogAge.current
}

/** What a look at the cluster found for the batch after a start: ends, the group's start offsets, what is pinned. */
private[planning] final case class Looked(
    ends: Map[(String, Int), Long],
    startOffsets: Map[(String, Int), Long],
    pinned: TopicPartitionRanges,
    now: TopicsNow
)
