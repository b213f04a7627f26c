package io.github.kafkashare.spark.planning

import java.util

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import io.github.kafkashare.spark.ack.{CommitWatcher, ExplicitQueries}
import io.github.kafkashare.spark.consumer.{ShareConsumerPool, Uninterrupted}
import io.github.kafkashare.spark.metrics.{Backlog, QueryTotals, ShareSourceMetrics}
import io.github.kafkashare.spark.monitoring.ProgressGauges
import io.github.kafkashare.spark.offsets._
import io.github.kafkashare.spark.options.ShareSourceOptions
import io.github.kafkashare.spark.reader.KafkaShareReaderFactory
import org.apache.hadoop.fs.Path
import org.apache.spark.internal.Logging
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.connector.read.{InputPartition, PartitionReaderFactory}
import org.apache.spark.sql.connector.read.streaming._

/**
 * The driver side of the source. Batches are numbered; a batch is "whatever the share consumers
 * acquire when it runs", pinned in the acquisition log so that every later read of it is the same.
 *
 * When to run a batch, without acquiring anything to find out (an idle source must run none):
 *  - the previous batch got records: more may be waiting;
 *  - a topic's end offset moved since the last batch was planned: new records;
 *  - a hole: an offset between the group's start offset and the end offset that no batch of this
 *    query pinned. It is with another member of the group, or it came back to the group (a lock
 *    expired after a crash, a record was released). A probe batch runs one lock duration after the
 *    last batch, and each probe that finds nothing doubles the wait (up to 10 minutes), so holes
 *    that stay (records other members hold, transaction markers) cost little.
 * Trigger.AvailableNow notes each partition's end offset when it starts, and runs batches until every
 * record below those ends is pinned by this query or acknowledged by the group (the group's start
 * offset passed it), whatever producers write meanwhile; records other members hold still count, up
 * to a few batches that find nothing.
 * A subscribePattern that matches no topic runs no batch until a topic appears.
 *
 * Batches are named by Spark's batch id (the offset's `batch`): the id foreachBatch receives and the
 * commit log uses. Spark also runs batches this source takes no part in (no-data batches of stateful
 * queries, batches where only another source of the query moved), so the ids have gaps.
 *
 * Spark's real-time mode (4.1+) plans batches differently ([[RealTimeBatches]]): the subclass in
 * jvm/realtime/, built against Spark 4.1, mixes in Spark's interfaces and calls the `realTime` methods.
 */
class KafkaShareMicroBatchStream(
    options: ShareSourceOptions,
    checkpointDir: String,
    cluster: ClusterView,
    settings: StreamSettings,
    hadoopConf: SerializableHadoopConf,
    totals: QueryTotals,
    explicit: Option[ExplicitQueries.Registration]
) extends MicroBatchStream with SupportsAdmissionControl with SupportsTriggerAvailableNow
    with ReportsSourceMetrics with Logging {

  private val lockDurationMs = settings.lockDurationMs
  private val acquisitions   = new AcquisitionLog(checkpointDir, hadoopConf)
  private val decisions      = new DecisionLog(checkpointDir, hadoopConf)
  private val queryRoot      = new Path(checkpointDir).getParent.getParent
  private val commitLogDir   = new Path(queryRoot, "commits")
  private val markers        = new SourceMarkers(checkpointDir, hadoopConf)
  markers.clearStopped() // a stop of an earlier run of this query: its executors' consumers are closed
  private val stopWatch = new StopWatch(markers)
  // Spark builds the source on the stream thread; after a restart it may run the batch it finds in the
  // offset log without asking latestOffset first, and that batch can be stopped too.
  stopWatch.noteStreamThread()
  private val sparkBatchIds = new SparkBatchIds(new Path(queryRoot, "offsets"), hadoopConf)
  private val previous      = new PreviousBatches(acquisitions, decisions, options.mode)
  private val identity      = new OffsetIdentity(options, cluster, acquisitions)
  private val deliveryLimit = new DeliveryLimitWatch(cluster, settings.initialDeliveryLimit, totals)
  private val readTasks =
    new ReadTaskPlanner(
      options,
      checkpointDir,
      settings,
      ReadTaskPlanner.Logs(acquisitions, decisions, markers, commitLogDir, hadoopConf),
      totals
    )
  private val phaseTwo = new PhaseTwoWait(acquisitions, markers, commitLogDir, settings.locks, readTasks.renewLocks)

  // The topics of the last planned batch: its read tasks subscribe to them.
  private var topics      = cluster.resolveTopics()
  private var plannedEnds = Map.empty[(String, Int), Long]
  private var plannedAt   = System.nanoTime
  // The offset latestOffset returned last: planInputPartitions of any other end is a re-run of a
  // batch planned before (after a restart), whose identity is checked against the cluster again.
  private var lastPlanned = Option.empty[ShareSourceOffset]
  private val backlog     = new BacklogHistory
  private val backlogAge  = new BacklogAge(cluster.recordTimestamps)
  // The group's start offsets of the partitions with a backlog, at the last look: where backlogAge reads.
  private var oldestHeld     = Map.empty[(String, Int), Long]
  private var probeWaitMs    = lockDurationMs
  private var lastBatchStats = BatchStats(0, 0, 0)
  // Trigger.AvailableNow: the end offset of every partition when the query started.
  private var availableNowEnds: Option[Map[(String, Int), Long]] = None
  private var emptyBatchesInARow                                 = 0
  // A pattern that matches nothing yet is said once, not at every trigger.
  private var saidNoTopic = false

  override def initialOffset(): Offset = ShareSourceOffset.initial

  override def deserializeOffset(json: String): Offset = ShareSourceOffset.fromJson(json)

  override def getDefaultReadLimit: ReadLimit =
    options.maxRecordsPerTrigger.map(ReadLimit.maxRows).getOrElse(ReadLimit.allAvailable())

  override def prepareForTriggerAvailableNow(): Unit =
    availableNowEnds = Some(cluster.endOffsets(cluster.resolveTopics()))

  override def latestOffset(): Offset = throw new UnsupportedOperationException("latestOffset(start, limit) is used")

  override def latestOffset(startOffset: Offset, limit: ReadLimit): Offset = {
    stopWatch.noteStreamThread()
    // Real time: Spark asks before every batch, for its progress only; the batch's end comes from its tasks.
    if (realTime.nonEmpty) return startOffset
    val start               = ShareSourceOffset.of(startOffset)
    val (entries, released) = previous.of(start)
    noteLastBatch(start, entries)
    deliveryLimit.warnOfLastAttempts()
    topics = cluster.resolveTopics()
    if (topics.isEmpty) return waitForTopic(start)
    saidNoTopic = false
    val Looked(ends, startOffsets, pinned, now) = look(start, entries, released)

    val decision = BatchDecision.decide(
      BatchDecision.Inputs(
        ends,
        plannedEnds,
        startOffsets,
        pinned,
        firstRun = start.batch < 0 || plannedEnds.isEmpty,
        gotSome = lastBatchStats.records > 0,
        // An executor's idle consumer acquired records (records came back to the group after the last
        // batch got nothing): they are locked to it, and only a batch takes them before the lock runs out.
        fetchedWhileIdle = markers.takeFetchedWhileIdle(),
        sinceLastPlanMs = (System.nanoTime - plannedAt) / 1000000L,
        probeWaitMs,
        availableNowEnds.map(_ -> emptyBatchesInARow)
      )
    )
    if (decision == BatchDecision.Skip) return start
    if (decision == BatchDecision.Probe) {
      logInfo(s"kafka-share: probing for records that came back to group '${options.groupId}'")
      probeWaitMs = math.min(probeWaitMs * 2, BatchDecision.MaxProbeWaitMs)
    }
    plan(start, ends, pinned, now.ids)
  }

  /** What a batch after `start` must not emit again, and where the topics end (the backlog noted). */
  private def look(start: ShareSourceOffset, entries: Seq[AcquisitionEntry], released: TopicPartitionRanges): Looked = {
    identity.check(start)
    val now          = cluster.topicsNow(topics)
    val ends         = now.ends
    val groupOffsets = cluster.groupOffsets()
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

  /** The next batch's end offset: what it must not emit again, and whose it is. */
  private def plan(
      start: ShareSourceOffset,
      ends: Map[(String, Int), Long],
      pinned: TopicPartitionRanges,
      ids: Map[String, String]
  ): Offset = {
    plannedEnds = ends
    plannedAt = System.nanoTime
    backlog.planned()
    backlogAge.planned(oldestHeld)
    totals.resetLastBatch()
    deliveryLimit.refresh()
    // The ids of topics still pinned stay recorded while they are gone (a pattern's topic deleted):
    // when one comes back under its name, the new id tells its records from the pinned ones.
    val keptIds = start.topicIds.filter { case (t, _) => pinned.byPartition.keysIterator.exists(_._1 == t) } ++ ids
    val batch   = sparkBatchIds.next()
    lastPlanned = Some(ShareSourceOffset(batch, tasksOf(batch), pinned, identity.clusterId, options.groupId, keptIds))
    lastPlanned.get
  }

  private var firstPlan = true

  /**
   * The read tasks of a new batch: the parallelism, or more for the first batch planned after a restart
   * whose id a real-time run used without committing (the trigger changed since): that run's log tasks
   * can go past the parallelism, and each must be replayed by a task of the batch, and counted pinned after it.
   */
  private def tasksOf(batch: Long): Int = {
    // One look-up first: the folder of a batch about to be planned exists only after such a run.
    val leftover =
      if (firstPlan && acquisitions.hasBatch(batch)) acquisitions.partNames(batch).map(_._1).maxOption.fold(0)(_ + 1) else 0
    firstPlan = false
    math.max(settings.parallelism, leftover)
  }

  // Spark's real-time mode, once Spark said so (before the first batch).
  private var realTime = Option.empty[RealTimeBatches]

  /** Real time: checks what this query asks against what real time can hold, then plans batches that way. */
  protected def enterRealTime(): Unit = {
    RealTimeBatches.check(options, settings.parallelism, SparkSession.active)
    realTime = Some(new RealTimeBatches(options.groupId, settings.parallelism, acquisitions))
    logInfo(s"kafka-share: group '${options.groupId}': Spark's real-time mode, ${settings.parallelism} read tasks " +
      "polling for the whole of each batch")
  }

  /** Real time: the read tasks of the batch Spark runs now, from `startOffset` (it knows no end yet). */
  protected def realTimePartitions(startOffset: Offset): Array[InputPartition] = {
    val batches = realTime.getOrElse(throw new IllegalStateException("real-time partitions before real-time mode"))
    val began   = System.nanoTime
    val start   = ShareSourceOffset.of(startOffset)
    val batch   = RealTimeBatches.sparkBatchId().getOrElse(sparkBatchIds.next())
    // Spark may plan a batch's scan more than once: the same tasks each time (the log is the same until they run).
    realTimePlanned match {
      case Some((planned, partitions)) if planned == (batch, start) => return partitions
      case _                                                        =>
    }
    val (entries, released) = previous.of(start)
    deliveryLimit.warnOfLastAttempts()
    topics = cluster.resolveTopics()
    // A pattern that matches nothing yet: the tasks wait out the batch (a topic may appear by the next).
    val looked = if (topics.isEmpty) None else Some(look(start, entries, released))
    if (looked.isEmpty) { backlog.looked(Backlog.none); oldestHeld = Map.empty }
    val pinned = looked.fold(start.pinned)(_.pinned)
    backlog.planned()
    backlogAge.planned(oldestHeld)
    totals.resetLastBatch()
    deliveryLimit.refresh()
    plannedAt = System.nanoTime
    val ids     = looked.fold(Map.empty[String, String])(_.now.ids)
    val keptIds = start.topicIds.filter { case (t, _) => pinned.byPartition.keysIterator.exists(_._1 == t) } ++ ids
    val plan    = batches.plan(start, batch, pinned, identity.clusterId, keptIds)
    val tasks   = readTasks.realTimeTasks(plan.end.batch, plan.firstTask, pinned, topics, deliveryLimit.current, plan.work)
    realTimePlanned = Some(((batch, start), tasks))
    logInfo(s"kafka-share: real-time batch $batch planned in ${(System.nanoTime - began) / 1000000L} ms")
    tasks
  }

  private var realTimePlanned = Option.empty[((Long, ShareSourceOffset), Array[InputPartition])]

  /** Real time: the end of the batch that ran, from its tasks' ends (Spark writes it to its offset log). */
  protected def realTimeEnd(taskEnds: Array[PartitionOffset]): Offset = {
    val batches = realTime.getOrElse(throw new IllegalStateException("real-time end before real-time mode"))
    val ended   = batches.end(taskEnds.toSeq)
    lastBatchStats = BatchStats(ended.batch, batches.lastPinned, 0)
    ended
  }

  /** Figures of the batch before `start`, once per batch: the empty batches in a row, a batch slower than its locks. */
  private def noteLastBatch(start: ShareSourceOffset, entries: Seq[AcquisitionEntry]): Unit = {
    val stats = BatchStats(start.batch, entries.map(_.recordCount).sum, entries.flatMap(_.runs).map(_.deliveryCount).maxOption.getOrElse(0))
    if (stats != lastBatchStats) {
      // A new batch of this source ran since the last call (not just another trigger of a query
      // whose other sources moved, or an idle one): said once per batch.
      emptyBatchesInARow = if (stats.records > 0) 0 else emptyBatchesInARow + 1
      lastBatchStats = stats
      val batchMs = (System.nanoTime - plannedAt) / 1000000L
      if (options.holdsUntilCommit && !readTasks.renewLocks && start.batch >= 0 && batchMs > settings.locks.unrenewedHoldMs)
        logWarning(s"kafka-share: batch ${start.batch} took $batchMs ms, more than 80% of the lock duration " +
          s"($lockDurationMs ms) for which ${if (explicit.nonEmpty) "explicit acknowledgement" else "two-phase-commit"} holds " +
          "records. Raise the group's share.record.lock.duration.ms " +
          "(docs/guide/operating.md) or make batches smaller (maxRecordsPerTrigger)")
    }
    if (lastBatchStats.records > 0) probeWaitMs = lockDurationMs
  }

  /**
   * Only a pattern can match nothing (a topic list must exist at start). No batch: a read task would
   * have nothing to subscribe to. The next trigger asks again.
   */
  private def waitForTopic(start: ShareSourceOffset): Offset = {
    if (!saidNoTopic) logInfo(s"kafka-share: no topic matches ${KafkaShareTable.describe(options.subscription)} yet; " +
      "waiting for one (no batch runs meanwhile)")
    saidNoTopic = true
    backlog.looked(Backlog.none)
    oldestHeld = Map.empty
    backlogAge.noBacklog()
    // Before the first batch, no offset at all: Spark takes even the initial offset for new data.
    if (start.batch < 0) null else start
  }

  override def planInputPartitions(start: Offset, end: Offset): Array[InputPartition] = {
    val batchEnd = ShareSourceOffset.of(end)
    if (!lastPlanned.contains(batchEnd)) identity.checkReplayable(batchEnd, topics)
    explicit.foreach(_.runningBatch = batchEnd.batch)
    readTasks.tasks(batchEnd, topics, deliveryLimit.current, carried = ShareSourceOffset.of(start).unemitted)
  }

  override def createReaderFactory(): PartitionReaderFactory = KafkaShareReaderFactory

  /** Real time: how Spark's end of a batch is told to the tasks' reader (the subclass's factory). */
  protected def isRealTime: Boolean = realTime.nonEmpty

  override def commit(end: Offset): Unit = {
    // Spark keeps the offset log of the last minBatchesToRetain batches; older batches never re-run.
    val retained = SparkSession.active.conf.get("spark.sql.streaming.minBatchesToRetain", "100").toLong
    val batch    = ShareSourceOffset.of(end).batch
    acquisitions.purgeBefore(batch - retained)
    decisions.purgeBefore(batch - retained)
    if (options.holdsUntilCommit) markers.purgeBefore(batch) // only the last batch's are ever waited for
  }

  /** The backlog when the newest batch was planned, for the SQL tab. */
  def backlogAtPlanning: Long = backlog.atPlanning

  override def metrics(latestConsumedOffset: util.Optional[Offset]): util.Map[String, String] = {
    val pinnedRanges = if (latestConsumedOffset.isPresent) ShareSourceOffset.of(latestConsumedOffset.get).pinned.rangeCount else 0
    (Map(
      "lastBatch"                     -> lastBatchStats.batch.toString,
      "lastBatchRecordsAcquired"      -> lastBatchStats.records.toString,
      "lastBatchMaxDeliveryCount"     -> lastBatchStats.maxDeliveryCount.toString,
      "pinnedRanges"                  -> pinnedRanges.toString,
      "parallelism"                   -> settings.parallelism.toString,
      "lockDurationMs"                -> lockDurationMs.toString,
      "deliveryCountLimit"            -> deliveryLimit.current.fold("-")(_.toString),
      ShareSourceMetrics.BacklogAgeMs -> backlogAge.current.toString
    ) ++ backlog.metrics ++ totals.asMetrics ++ totals.lastBatchMetrics).asJava
  }

  // Spark calls it on the stream thread it interrupted to stop the query: Kafka's clients would refuse to work there.
  override def stop(): Unit = Uninterrupted {
    stopWatch.end()
    try if (options.holdsUntilCommit) lastPlanned.foreach(phaseTwo.await(_, plannedAt))
    catch { case NonFatal(e) => logWarning("kafka-share: waiting for the last batch's acknowledgements failed", e) }
    explicit.foreach(ExplicitQueries.unregister)
    // Promise 7, and the hand-over: held records acknowledged (CommitWatcher), what idle consumers fetched
    // ahead given back, and every consumer of the query closed, so that the group's next reader gets the
    // records at once. Here where the driver runs read tasks too (local mode), on executors through the
    // marker (the commit watcher and the pool's evictor look for it every second).
    try markers.markStopped()
    catch { case NonFatal(e) => logWarning("kafka-share: could not mark the query stopped", e) }
    try CommitWatcher.endHoldsOf(readTasks.consumerKey.query)
    catch { case NonFatal(e) => logWarning("kafka-share: ending the query's held batches failed", e) }
    ShareConsumerPool.closeIdle(readTasks.consumerKey)
    cluster.close()
  }

  // The progress names the source by it: the metrics plugin finds this source's figures so (ProgressGauges).
  override def toString: String = s"${ProgressGauges.SourcePrefix}${options.groupId}]"
}

/** What a look at the cluster found for the batch after a start: ends, the group's start offsets, what is pinned. */
private final case class Looked(
    ends: Map[(String, Int), Long],
    startOffsets: Map[(String, Int), Long],
    pinned: TopicPartitionRanges,
    now: TopicsNow
)
