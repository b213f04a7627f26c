package io.github.kafkashare.spark.planning

import java.util

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import io.github.kafkashare.spark.ack.ExplicitQueries
import io.github.kafkashare.spark.consumer.Uninterrupted
import io.github.kafkashare.spark.metrics.{QueryTotals, ShareSourceMetrics}
import io.github.kafkashare.spark.monitoring.ProgressGauges
import io.github.kafkashare.spark.offsets._
import io.github.kafkashare.spark.options.ShareSourceOptions
import io.github.kafkashare.spark.reader.KafkaShareReaderFactory
import io.github.kafkashare.spark.runtime.JvmResources
import io.github.kafkashare.spark.sparkinternals.{CheckpointLayout, SparkConfs}
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
 * Spark's real-time mode (4.1+) shares the planning step ([[BatchPlanning]]): the subclass in jvm/realtime/,
 * built against Spark 4.1, mixes in Spark's interfaces and plans its batches with [[realTimePlanning]].
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
  private val layout         = CheckpointLayout(checkpointDir)
  private val commitLogDir   = layout.commits
  private val markers        = new SourceMarkers(checkpointDir, hadoopConf)
  markers.clearStopped() // a stop of an earlier run of this query: its executors' consumers are closed
  private val stopWatch = new StopWatch(markers)
  // Spark builds the source on the stream thread; after a restart it may run the batch it finds in the
  // offset log without asking latestOffset first, and that batch can be stopped too.
  stopWatch.noteStreamThread()
  private val sparkBatchIds = new SparkBatchIds(layout.offsets, hadoopConf)
  private val planning      = new BatchPlanning(options, cluster, settings, acquisitions, decisions, totals)
  private val readTasks =
    new ReadTaskPlanner(
      options,
      checkpointDir,
      settings,
      ReadTaskPlanner.Logs(acquisitions, decisions, markers, commitLogDir, hadoopConf),
      totals
    )
  private val parallelism = new BatchParallelism(options, settings.parallelism, planning, totals)
  private val phaseTwo    = new PhaseTwoWait(acquisitions, markers, commitLogDir, settings.locks, readTasks.renewLocks)

  private var plannedEnds = Map.empty[(String, Int), Long]
  // The offset latestOffset returned last: planInputPartitions of any other end is a re-run of a
  // batch planned before (after a restart), whose identity is checked against the cluster again.
  private var lastPlanned = Option.empty[ShareSourceOffset]
  private var probeWaitMs = lockDurationMs
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
    nextOffset(startOffset)
  }

  /** The end of the next batch after `startOffset`, or the start where no batch is to run. */
  protected def nextOffset(startOffset: Offset): Offset = {
    val start               = ShareSourceOffset.of(startOffset)
    val (entries, released) = planning.previousOf(start)
    noteLastBatch(start, entries)
    planning.refreshTopics()
    if (planning.topics.isEmpty) return waitForTopic(start)
    saidNoTopic = false
    val Looked(ends, startOffsets, pinned, now) = planning.look(start, entries, released)

    val decision = BatchDecision.decide(
      BatchDecision.Inputs(
        ends,
        plannedEnds,
        startOffsets,
        pinned,
        firstRun = start.batch < 0 || plannedEnds.isEmpty,
        gotSome = planning.lastBatch.records > 0,
        // An executor's idle consumer acquired records (records came back to the group after the last
        // batch got nothing): they are locked to it, and only a batch takes them before the lock runs out.
        fetchedWhileIdle = markers.takeFetchedWhileIdle(),
        sinceLastPlanMs = (System.nanoTime - planning.plannedAt) / 1000000L,
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

  /** The next batch's end offset: what it must not emit again, and whose it is. */
  private def plan(
      start: ShareSourceOffset,
      ends: Map[(String, Int), Long],
      pinned: TopicPartitionRanges,
      ids: Map[String, String]
  ): Offset = {
    plannedEnds = ends
    val batch   = sparkBatchIds.next()
    val tasks   = readTasks.countFor(batch, parallelism.after(start)) // before planned(), which starts the next batch's clock
    val keptIds = planning.planned(start, pinned, ids)
    lastPlanned = Some(ShareSourceOffset(batch, tasks, pinned, planning.identity.clusterId, options.groupId, keptIds))
    lastPlanned.get
  }

  /** Real time (the subclass): the planning of its batches, from this stream's logs and planning step. */
  protected def realTimePlanning(): RealTimePlanning =
    new RealTimePlanning(options, parallelism.forRealTime(), acquisitions, planning, readTasks, sparkBatchIds, cluster)

  /** Figures of the batch before `start`, once per batch: the empty batches in a row, a batch slower than its locks. */
  private def noteLastBatch(start: ShareSourceOffset, entries: Seq[AcquisitionEntry]): Unit = {
    val stats = BatchStats(start.batch, entries.map(_.recordCount).sum, entries.flatMap(_.runs).map(_.deliveryCount).maxOption.getOrElse(0))
    if (stats != planning.lastBatch) {
      // A new batch of this source ran since the last call (not just another trigger of a query
      // whose other sources moved, or an idle one): said once per batch.
      emptyBatchesInARow = if (stats.records > 0) 0 else emptyBatchesInARow + 1
      planning.lastBatch = stats
      val batchMs = (System.nanoTime - planning.plannedAt) / 1000000L
      if (options.holdsUntilCommit && !readTasks.renewLocks && start.batch >= 0 && batchMs > settings.locks.unrenewedHoldMs)
        logWarning(s"kafka-share: batch ${start.batch} took $batchMs ms, more than 80% of the lock duration " +
          s"($lockDurationMs ms) for which ${if (explicit.nonEmpty) "explicit acknowledgement" else "two-phase-commit"} holds " +
          "records. Raise the group's share.record.lock.duration.ms " +
          "(docs/guide/operating.md) or make batches smaller (maxRecordsPerTrigger)")
    }
    if (planning.lastBatch.records > 0) probeWaitMs = lockDurationMs
  }

  /**
   * Only a pattern can match nothing (a topic list must exist at start). No batch: a read task would
   * have nothing to subscribe to. The next trigger asks again.
   */
  private def waitForTopic(start: ShareSourceOffset): Offset = {
    if (!saidNoTopic) logInfo(s"kafka-share: no topic matches ${KafkaShareTable.describe(options.subscription)} yet; " +
      "waiting for one (no batch runs meanwhile)")
    saidNoTopic = true
    planning.noTopic()
    // Before the first batch, no offset at all: Spark takes even the initial offset for new data.
    if (start.batch < 0) null else start
  }

  override def planInputPartitions(start: Offset, end: Offset): Array[InputPartition] = {
    val batchEnd = ShareSourceOffset.of(end)
    if (!lastPlanned.contains(batchEnd)) planning.identity.checkReplayable(batchEnd, planning.topics)
    explicit.foreach(_.runningBatch = batchEnd.batch)
    readTasks.tasks(batchEnd, planning.topics, planning.deliveryLimitNow, carried = ShareSourceOffset.of(start).unemitted)
  }

  override def createReaderFactory(): PartitionReaderFactory = KafkaShareReaderFactory

  override def commit(end: Offset): Unit = {
    // Spark keeps the offset log of the last minBatchesToRetain batches; older batches never re-run.
    val retained = SparkConfs.minBatchesToRetain(SparkSession.active)
    val batch    = ShareSourceOffset.of(end).batch
    acquisitions.purgeBefore(batch - retained)
    decisions.purgeBefore(batch - retained)
    if (options.holdsUntilCommit) markers.purgeBefore(batch) // only the last batch's are ever waited for
  }

  /** The backlog when the newest batch was planned, for the SQL tab. */
  def backlogAtPlanning: Long = planning.backlogAtPlanning

  override def metrics(latestConsumedOffset: util.Optional[Offset]): util.Map[String, String] = {
    val pinnedRanges = if (latestConsumedOffset.isPresent) ShareSourceOffset.of(latestConsumedOffset.get).pinned.rangeCount else 0
    val last         = planning.lastBatch
    (Map(
      "lastBatch"                     -> last.batch.toString,
      "lastBatchRecordsAcquired"      -> last.records.toString,
      "lastBatchMaxDeliveryCount"     -> last.maxDeliveryCount.toString,
      "pinnedRanges"                  -> pinnedRanges.toString,
      "lockDurationMs"                -> lockDurationMs.toString,
      "deliveryCountLimit"            -> planning.deliveryLimitNow.fold("-")(_.toString),
      ShareSourceMetrics.BacklogAgeMs -> planning.backlogAgeMs.toString
    ) ++ parallelism.metrics ++ planning.backlogMetrics ++ totals.asMetrics ++ totals.lastBatchMetrics).asJava
  }

  // Spark calls it on the stream thread it interrupted to stop the query: Kafka's clients would refuse to work there.
  override def stop(): Unit = Uninterrupted {
    stopWatch.end()
    try if (options.holdsUntilCommit) lastPlanned.foreach(phaseTwo.await(_, planning.plannedAt))
    catch { case NonFatal(e) => logWarning("kafka-share: waiting for the last batch's acknowledgements failed", e) }
    explicit.foreach(ExplicitQueries.unregister)
    // Promise 7, and the hand-over: held records acknowledged (CommitWatcher), what idle consumers fetched
    // ahead given back, and every consumer of the query closed, so that the group's next reader gets the
    // records at once. Here where the driver runs read tasks too (local mode), on executors through the
    // marker (the commit watcher and the pool's evictor look for it every second).
    try markers.markStopped()
    catch { case NonFatal(e) => logWarning("kafka-share: could not mark the query stopped", e) }
    try JvmResources.commitWatcherIfStarted.foreach(_.endHoldsOf(readTasks.consumerKey.query))
    catch { case NonFatal(e) => logWarning("kafka-share: ending the query's held batches failed", e) }
    JvmResources.consumerPoolIfStarted.foreach(_.closeIdle(readTasks.consumerKey))
    cluster.close()
  }

  // The progress names the source by it: the metrics plugin finds this source's figures so (ProgressGauges).
  override def toString: String = s"${ProgressGauges.SourcePrefix}${options.groupId}]"
}
