package io.github.kafkashare.spark.planning

import java.util

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import io.github.kafkashare.spark.ack.ExplicitQueries
import io.github.kafkashare.spark.consumer.{ConsumerKey, ShareConsumerPool}
import io.github.kafkashare.spark.errors.ShareSourceErrors
import io.github.kafkashare.spark.metrics.{Backlog, QueryTotals, ShareSourceMetrics}
import io.github.kafkashare.spark.offsets._
import io.github.kafkashare.spark.offsets.store.CheckpointStore
import io.github.kafkashare.spark.options.{AcknowledgmentMode, ShareSourceOptions}
import io.github.kafkashare.spark.reader.{KafkaShareInputPartition, KafkaShareReaderFactory}
import org.apache.hadoop.conf.Configuration
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
 */
final class KafkaShareMicroBatchStream(
    options: ShareSourceOptions,
    checkpointDir: String,
    cluster: ClusterAccess,
    parallelism: Int,
    lockDurationMs: Long,
    initialDeliveryLimit: Option[Int],
    features: BrokerFeatures,
    clientSettings: Map[String, String],
    hadoopConf: SerializableHadoopConf,
    totals: QueryTotals,
    explicit: Option[ExplicitQueries.Registration]
) extends MicroBatchStream with SupportsAdmissionControl with SupportsTriggerAvailableNow
    with ReportsSourceMetrics with Logging {

  private val acquisitions = new AcquisitionLog(checkpointDir, hadoopConf)
  private val decisions    = new DecisionLog(checkpointDir, hadoopConf)
  private val queryRoot    = new Path(checkpointDir).getParent.getParent
  private val commitLogDir = new Path(queryRoot, "commits")
  private val markers      = new SourceMarkers(checkpointDir, hadoopConf)
  markers.clearStopped() // a stop of an earlier run of this query: its executors' consumers are closed
  private val sparkBatchIds = new SparkBatchIds(new Path(queryRoot, "offsets"), hadoopConf)
  private var topics        = cluster.resolveTopics()
  private var plannedEnds   = Map.empty[(String, Int), Long]
  private var plannedAt     = System.nanoTime
  // The group's backlog at the last look (every trigger), and at the planning of the last two batches.
  private var backlog                         = Backlog.none
  private var backlogAtPlan: Option[Long]     = None
  private var backlogAtLastPlan: Option[Long] = None
  private var probeWaitMs                     = lockDurationMs
  private var lastBatchStats                  = BatchStats(0, 0, 0)

  override def initialOffset(): Offset = ShareSourceOffset.initial

  override def deserializeOffset(json: String): Offset = ShareSourceOffset.fromJson(json)

  override def getDefaultReadLimit: ReadLimit =
    options.maxRecordsPerTrigger.map(ReadLimit.maxRows).getOrElse(ReadLimit.allAvailable())

  // Trigger.AvailableNow: the end offset of every partition when the query started.
  private var availableNowEnds: Option[Map[(String, Int), Long]] = None
  private var emptyBatchesInARow                                 = 0

  override def prepareForTriggerAvailableNow(): Unit =
    availableNowEnds = Some(cluster.endOffsets(cluster.resolveTopics()))

  // A pattern that matches nothing yet is said once, not at every trigger.
  private var saidNoTopic = false

  override def latestOffset(): Offset = throw new UnsupportedOperationException("latestOffset(start, limit) is used")

  override def latestOffset(startOffset: Offset, limit: ReadLimit): Offset = {
    val start               = ShareSourceOffset.of(startOffset)
    val (entries, released) = previousBatch(start)
    noteLastBatch(start, entries)
    warnOfLastAttempts()
    topics = cluster.resolveTopics()
    if (topics.isEmpty) return waitForTopic(start)
    saidNoTopic = false
    checkIdentity(start)
    val now          = cluster.topicsNow(topics)
    val ends         = now.ends
    val groupOffsets = cluster.groupOffsets()
    val startOffsets = groupOffsets.map { case (tp, o) => tp -> o.start }
    val pinned = withoutRecreatedTopics(
      AcquisitionEntry.offsetsOf(entries, start.pinned).minus(released).dropBelow(startOffsets),
      start,
      now.ids
    )
    backlog =
      if (features.brokerLag.available) Backlog.fromBroker(ends, groupOffsets.map { case (tp, o) => tp -> o.brokerLag })
      else Backlog.of(ends, startOffsets, pinned)

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
      probeWaitMs = math.min(probeWaitMs * 2, KafkaShareMicroBatchStream.MaxProbeWaitMs)
    }

    plannedEnds = ends
    plannedAt = System.nanoTime
    backlogAtLastPlan = backlogAtPlan
    backlogAtPlan = Some(backlog.total)
    refreshDeliveryLimit()
    // The ids of topics still pinned stay recorded while they are gone (a pattern's topic deleted):
    // when one comes back under its name, the new id tells its records from the pinned ones.
    val ids = start.topicIds.filter { case (t, _) => pinned.byPartition.keysIterator.exists(_._1 == t) } ++ now.ids
    lastPlanned = Some(ShareSourceOffset(sparkBatchIds.next(), parallelism, pinned, clusterId, options.groupId, ids))
    lastPlanned.get
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
      if (options.holdsUntilCommit && !renewLocks && start.batch >= 0 && batchMs > lockDurationMs * 0.8)
        logWarning(s"kafka-share: batch ${start.batch} took $batchMs ms, more than 80% of the lock duration " +
          s"($lockDurationMs ms) for which ${holder} holds records. Raise the group's share.record.lock.duration.ms " +
          "(docs/operations.md) or make batches smaller (maxRecordsPerTrigger)")
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
    backlog = Backlog.none
    // Before the first batch, no offset at all: Spark takes even the initial offset for new data.
    if (start.batch < 0) null else start
  }

  private var lastAttemptsSaid = 0L

  // The group's delivery count limit, read again now and then: raising it is the advice the source
  // gives, and the broker applies a new value at once.
  private var deliveryLimit       = initialDeliveryLimit
  private var deliveryLimitReadAt = System.nanoTime

  private def refreshDeliveryLimit(): Unit =
    if (System.nanoTime - deliveryLimitReadAt > KafkaShareMicroBatchStream.SettingsRereadNanos) {
      deliveryLimit = cluster.deliveryCountLimit()
      deliveryLimitReadAt = System.nanoTime
    }

  /** Records read on their last delivery attempt since the last call: the driver log says it too. */
  private def warnOfLastAttempts(): Unit = {
    val seen = totals(ShareSourceMetrics.AtLastDelivery).sum
    if (seen > lastAttemptsSaid)
      logWarning(s"kafka-share: ${seen - lastAttemptsSaid} record(s) were read on their last delivery attempt " +
        s"(the group's delivery count limit is ${deliveryLimit.getOrElse("-")}): ${ShareSourceErrors.LastAttemptAdvice}. " +
        s"Metric: ${ShareSourceMetrics.AtLastDelivery.totalName}")
    lastAttemptsSaid = seen
  }

  // The offset latestOffset returned last: planInputPartitions of any other end is a re-run of a
  // batch planned before (after a restart), whose identity is checked against the cluster again.
  private var lastPlanned = Option.empty[ShareSourceOffset]

  private lazy val clusterId = cluster.clusterId()

  /** Refuses offsets of another group or cluster: their pinned records and replays name other records. */
  private def checkIdentity(offset: ShareSourceOffset): Unit = {
    if (offset.group.nonEmpty && offset.group != options.groupId) throw ShareSourceErrors.groupChanged(offset.group, options.groupId)
    if (offset.cluster.nonEmpty && offset.cluster != clusterId)
      throw ShareSourceErrors.clusterChanged(offset.cluster, clusterId, options.bootstrapServers)
  }

  /**
   * A topic deleted and created again under its name starts at offset 0 again: the offsets pinned for
   * the old topic name none of the new one's records, and left in the set they would drop them as
   * redeliveries. The new topic is read from the group's start, like any new topic.
   */
  private def withoutRecreatedTopics(
      pinned: TopicPartitionRanges,
      start: ShareSourceOffset,
      ids: Map[String, String]
  ): TopicPartitionRanges = {
    val recreated = start.topicIds.collect { case (t, id) if ids.get(t).exists(_ != id) => t }.toSet
    if (recreated.isEmpty) pinned
    else {
      logWarning(s"kafka-share: topic(s) ${recreated.mkString(", ")} were deleted and created again since batch " +
        s"${start.batch}; forgetting the offsets pinned for the old topic(s), which name none of the new records")
      TopicPartitionRanges(pinned.byPartition.filter { case ((t, _), _) => !recreated(t) })
    }
  }

  // The previous batch's log entries, and what its decisions released: final once it committed,
  // which it did before Spark asks for offsets after it. Read once, not at every trigger.
  private var previous = Option.empty[(Long, Seq[AcquisitionEntry], TopicPartitionRanges)]

  /**
   * The log entries of the batch that ended at `start`, and the records of it that explicit-mode
   * decisions RELEASEd: they come back and must be emitted again, so they are not pinned.
   */
  private def previousBatch(start: ShareSourceOffset): (Seq[AcquisitionEntry], TopicPartitionRanges) =
    if (start.batch < 0) (Nil, TopicPartitionRanges.empty)
    else previous match {
      case Some((batch, entries, released)) if batch == start.batch => (entries, released)
      case _ =>
        val entries  = acquisitions.readBatch(start.batch, start.tasks)
        val released = releasedBy(start.batch, entries)
        previous = Some((start.batch, entries, released))
        (entries, released)
    }

  /**
   * Explicit mode: the records of `batch` that its decisions, or the default decision for records
   * that got none, RELEASEd. Decided after the batch committed, which Spark did before it asks for
   * the next batch's offsets.
   */
  private def releasedBy(batch: Long, entries: Seq[AcquisitionEntry]): TopicPartitionRanges = options.mode match {
    case AcknowledgmentMode.Implicit          => TopicPartitionRanges.empty
    case AcknowledgmentMode.Explicit(default) => decisions.released(batch, AcquisitionEntry.offsetsOf(entries), default)
  }

  // Idle consumers are closed after half a lock duration: what they fetched ahead is locked to them
  // until then, and after a whole lock duration it would be stale anyway (unless renewed, where the
  // cluster can). A consumer serves one query (its checkpoint): what it fetched ahead, or still has in
  // its buffer, is that query's subscription's.
  private val consumerKey = ConsumerKey(
    options.groupId,
    clientSettings,
    lockDurationMs / 2,
    subscription = KafkaShareTable.describe(options.subscription),
    query = checkpointDir,
    renewIdle = features.renew.available
  )

  private def holder = if (explicit.nonEmpty) "explicit acknowledgement" else "two-phase-commit"

  // Held records keep their locks by RENEW for as long as their batch runs, where the cluster can (BrokerFeatures).
  private val renewLocks = options.holdsUntilCommit && features.renew.available

  override def planInputPartitions(start: Offset, end: Offset): Array[InputPartition] = {
    val batchEnd = ShareSourceOffset.of(end)
    if (!lastPlanned.contains(batchEnd)) checkReplayable(batchEnd)
    explicit.foreach(_.runningBatch = batchEnd.batch)
    val perTask   = options.maxRecordsPerTrigger.map(KafkaShareMicroBatchStream.shareOf(_, batchEnd.tasks))
    val key       = consumerKey
    val totalsOut = totals.inTransit
    (0 until batchEnd.tasks).map { task =>
      KafkaShareInputPartition(
        batch = batchEnd.batch,
        task = task,
        topics = topics,
        pinned = batchEnd.pinned,
        maxRecords = perTask.map(_.min(Int.MaxValue).toInt).getOrElse(Int.MaxValue),
        strategy = options.strategy,
        consumerKey = key,
        pollTimeoutMs = options.pollTimeoutMs,
        readDurationMs = options.readDurationMs,
        lockDurationMs = lockDurationMs,
        deliveryLimit = deliveryLimit.getOrElse(Int.MaxValue),
        includeHeaders = options.includeHeaders,
        failOnDataLoss = options.failOnDataLoss,
        log = acquisitions,
        commitFile = new Path(commitLogDir, batchEnd.batch.toString).toString,
        hadoopConf = hadoopConf,
        totals = totalsOut,
        holdUntilCommit = options.holdsUntilCommit,
        renewLocks = renewLocks,
        explicitDefault = options.mode match {
          case AcknowledgmentMode.Explicit(default) => Some(default)
          case AcknowledgmentMode.Implicit          => None
        },
        decisions = decisions,
        markers = markers,
        poison = options.poison
      ): InputPartition
    }.toArray
  }

  /**
   * A batch planned before a restart runs again: its pinned records are replayed by topic, partition
   * and offset, which must still name the same records.
   */
  private def checkReplayable(batchEnd: ShareSourceOffset): Unit = {
    checkIdentity(batchEnd)
    val pinnedTopics = acquisitions.partsOf(batchEnd.batch).flatMap(_.runs.map(_.topic)).toSet
    val recorded     = batchEnd.topicIds.filter { case (t, _) => pinnedTopics(t) }
    val ids          = cluster.topicsNow(recorded.keys.toSeq.filter(topics.contains)).ids
    recorded.foreach { case (t, id) =>
      ids.get(t).filter(_ != id).foreach(now => throw ShareSourceErrors.topicRecreated(t, id, now, batchEnd.batch))
    }
  }

  override def createReaderFactory(): PartitionReaderFactory = KafkaShareReaderFactory

  override def commit(end: Offset): Unit = {
    // Spark keeps the offset log of the last minBatchesToRetain batches; older batches never re-run.
    val retained = SparkSession.active.conf.get("spark.sql.streaming.minBatchesToRetain", "100").toLong
    val batch    = ShareSourceOffset.of(end).batch
    acquisitions.purgeBefore(batch - retained)
    decisions.purgeBefore(batch - retained)
    if (options.holdsUntilCommit) markers.purgeBefore(batch) // only the last batch's are ever waited for
  }

  /** The backlog when the newest batch was planned, for the SQL tab. */
  def backlogAtPlanning: Long = backlogAtPlan.getOrElse(0L)

  override def metrics(latestConsumedOffset: util.Optional[Offset]): util.Map[String, String] = {
    val pinnedRanges = if (latestConsumedOffset.isPresent) ShareSourceOffset.of(latestConsumedOffset.get).pinned.rangeCount else 0
    (Map(
      "lastBatch"                   -> lastBatchStats.batch.toString,
      "lastBatchRecordsAcquired"    -> lastBatchStats.records.toString,
      "lastBatchMaxDeliveryCount"   -> lastBatchStats.maxDeliveryCount.toString,
      "pinnedRanges"                -> pinnedRanges.toString,
      "parallelism"                 -> parallelism.toString,
      "lockDurationMs"              -> lockDurationMs.toString,
      "deliveryCountLimit"          -> deliveryLimit.fold("-")(_.toString),
      "backlogRecords"              -> backlog.total.toString,
      "backlogRecordsByTopic"       -> backlog.render,
      "backlogChangeSinceLastBatch" -> backlogAtLastPlan.fold("0")(before => (backlog.total - before).toString)
    ) ++ totals.asMetrics).asJava
  }

  override def stop(): Unit = {
    try awaitPhaseTwo()
    catch { case NonFatal(e) => logWarning("kafka-share: waiting for the last batch's acknowledgements failed", e) }
    explicit.foreach(ExplicitQueries.unregister)
    // Promise 7: what idle consumers fetched ahead goes back to the group now. Here where the driver
    // runs read tasks too (local mode), on executors through the marker (ShareConsumerPool's evictor).
    ShareConsumerPool.closeIdle(consumerKey)
    try markers.markStopped()
    catch { case NonFatal(e) => logWarning("kafka-share: could not mark the query stopped", e) }
    cluster.close()
  }

  /**
   * Two-phase commit and explicit mode acknowledge a batch's records after it commits, on the
   * executors that hold them. A query that ends (Trigger.AvailableNow, a stop) waits for that phase 2
   * of its last committed batch, at most a lock duration: an application that stops its executors
   * right after would otherwise leave the records locked, to come back to the group (a delivery
   * attempt spent) instead of being acknowledged.
   */
  private def awaitPhaseTwo(): Unit = if (options.holdsUntilCommit) lastPlanned.foreach { last =>
    if (markers.exists(new Path(commitLogDir, last.batch.toString))) {
      val holding = (0 until last.tasks).filter(t => acquisitions.read(last.batch, t).exists(_.runs.nonEmpty))
      // The watcher acknowledges within a lock duration of the batch's polls; with renewal, a batch may
      // outlast that, and the watcher sees the commit at the latest at its next renewal round.
      val deadline =
        if (renewLocks) System.nanoTime + (lockDurationMs / 2 + 1000L) * 1000000L
        else plannedAt + (lockDurationMs + 1000L) * 1000000L
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
          s"${waiting.mkString(", ")} were not acknowledged within the lock duration ($lockDurationMs ms) after the query " +
          "ended; they come back to the group and, pinned, are dropped when this query runs again")
      } finally if (interrupted) Thread.currentThread.interrupt()
    }
  }

  override def toString: String = s"KafkaShareMicroBatchStream[${options.groupId}]"
}

/** What the previous batch pinned, from its log entries. */
final case class BatchStats(batch: Long, records: Long, maxDeliveryCount: Int)

object KafkaShareMicroBatchStream extends Logging {

  /** A task's share of `max` records over `tasks` tasks, rounded up (without overflow near Long.MaxValue), at least 1. */
  def shareOf(max: Long, tasks: Int): Long = ClientSettings.shareOf(max, tasks)

  /** The longest wait between probe batches that keep finding nothing. */
  val MaxProbeWaitMs: Long = 10 * 60 * 1000L

  /** How often group settings that may change while the query runs are read again. */
  val SettingsRereadNanos: Long = 60L * 1000 * 1000 * 1000

  /**
   * The Hadoop configuration for the source's checkpoint logs, as Spark makes it for its own
   * (SessionState.newHadoopConf): the application's, with the session's settings on top (a storage
   * key set with spark.conf.set, the SQL setting that picks the CheckpointFileManager).
   */
  def checkpointConf(spark: SparkSession): Configuration = {
    val conf = new Configuration(spark.sparkContext.hadoopConfiguration)
    spark.conf.getAll.foreach { case (k, v) => if (v != null) conf.set(k, v) }
    conf
  }

  /** Checks the cluster, prepares the group, and builds the stream. */
  def start(options: ShareSourceOptions, checkpointDir: String, spark: SparkSession): KafkaShareMicroBatchStream = {
    val cluster = new ClusterAccess(options)
    try {
      cluster.checkShareGroupsServed()
      val topics = cluster.resolveTopics() // fails clearly on a missing topic, before anything else
      options.startingOffsets.foreach(cluster.applyStartingOffsets)
      val lockDurationMs = options.lockTimeoutMs.getOrElse(cluster.lockDurationMs())
      val features       = cluster.features()
      val partitions     = cluster.topicsNow(topics).ends.size
      options.brokerDeadLetterTopic.foreach(cluster.useBrokerDeadLetters(_, features)) // before the limit: none is lost at it then
      val deliveryLimit = cluster.deliveryCountLimit()
      val lockLimit     = cluster.recordLockLimit()
      val parallelism   = options.parallelism.getOrElse(spark.sparkContext.defaultParallelism)
      // Each read task is a member of the group; the group takes at most group.share.max.size.
      cluster.groupMaxSize().filter(parallelism > _).foreach { max =>
        throw ShareSourceErrors.parallelismAboveGroupSize(parallelism, max, options.groupId)
      }
      val hadoopConf = new SerializableHadoopConf(KafkaShareMicroBatchStream.checkpointConf(spark))
      val store      = CheckpointStore.of(new Path(checkpointDir), hadoopConf.value)
      if (!store.createIfAbsentAtomic) logWarning(ShareSourceErrors.checkpointStoreNotAtomic(checkpointDir, store.createIfAbsentBy))
      logInfo(s"kafka-share: group '${options.groupId}', ${KafkaShareTable.describe(options.subscription)}, " +
        s"strategy ${options.strategy.name}, $parallelism consumers per batch, lock duration $lockDurationMs ms, " +
        s"checkpoint logs written by ${store.createIfAbsentBy}, " +
        s"delivery count limit ${deliveryLimit.getOrElse("- (none that loses records)")}, " +
        s"record lock limit ${lockLimit.fold("- (unreadable)")(l => s"$l per partition")}" +
        options.poison.fold("")(p =>
          s", records delivered more than ${p.maxDeliveries} times rejected" +
            p.deadLetterTopic.fold("")(t => s" via '$t'")
        ))
      logInfo(s"kafka-share: group '${options.groupId}': ${features.describe}")
      val clientSettings = chooseClientSettings(options, parallelism, partitions, lockLimit, features)
      if (options.holdsUntilCommit && !features.renew.available) warnLocksNotRenewed(options, features, lockDurationMs)
      val explicit = registerExplicitMode(options, checkpointDir, hadoopConf, spark)
      try new KafkaShareMicroBatchStream(
          options,
          checkpointDir,
          cluster,
          parallelism,
          lockDurationMs,
          deliveryLimit,
          features,
          clientSettings,
          hadoopConf,
          QueryTotals(spark.sparkContext),
          explicit
        )
      catch { case e: Throwable => explicit.foreach(ExplicitQueries.unregister); throw e }
    } catch {
      case e: Throwable => cluster.close(); throw e
    }
  }

  /** The consumers' settings for this cluster (ClientSettings); the start-up log names those the source chose. */
  private def chooseClientSettings(
      options: ShareSourceOptions,
      parallelism: Int,
      partitions: Int,
      lockLimit: Option[Int],
      features: BrokerFeatures
  ): Map[String, String] = {
    val settings =
      ClientSettings.of(options, parallelism, partitions, lockLimit, features.strictAcquisition.available, features.renew.available)
    val chosen = ClientSettings.Chosen.filter(k => settings.get(k) != options.kafkaParams.get(k))
    if (chosen.nonEmpty)
      logInfo(s"kafka-share: group '${options.groupId}': consumer settings chosen by the source: " +
        chosen.map(k => s"$k=${settings(k)}").mkString(", "))
    settings
  }

  private def warnLocksNotRenewed(options: ShareSourceOptions, features: BrokerFeatures, lockDurationMs: Long): Unit =
    logWarning(s"kafka-share: group '${options.groupId}': " +
      s"${if (options.mode == AcknowledgmentMode.Implicit) options.strategy.name else "explicit mode"} " +
      s"holds records until their batch commits and cannot renew their locks here (${features.renew.why}): a batch " +
      s"that takes longer than 80% of the lock duration ($lockDurationMs ms) has its records acknowledged before it " +
      "commits (docs/delivery-semantics.md, 'Held records and the lock')")

  /** Explicit mode: only foreachBatch can decide; the query's logs are registered for its decisions. */
  private def registerExplicitMode(
      options: ShareSourceOptions,
      checkpointDir: String,
      hadoopConf: SerializableHadoopConf,
      spark: SparkSession
  ): Option[ExplicitQueries.Registration] = options.mode match {
    case AcknowledgmentMode.Implicit => None
    case AcknowledgmentMode.Explicit(_) =>
      QuerySink.ofCurrentQuery(spark).filterNot(_ == "ForeachBatchSink").foreach { sink =>
        throw ShareSourceErrors.explicitModeNeedsForeachBatch(sink)
      }
      val registration =
        new ExplicitQueries.Registration(
          options.groupId,
          new AcquisitionLog(checkpointDir, hadoopConf),
          new DecisionLog(checkpointDir, hadoopConf)
        )
      ExplicitQueries.register(registration)
      Some(registration)
  }
}
