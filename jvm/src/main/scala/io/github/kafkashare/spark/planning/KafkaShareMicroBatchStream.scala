package io.github.kafkashare.spark.planning

import java.util

import scala.jdk.CollectionConverters._

import io.github.kafkashare.spark.ack.ExplicitQueries
import io.github.kafkashare.spark.consumer.{ConsumerKey, ShareConsumerPool}
import io.github.kafkashare.spark.errors.ShareSourceErrors
import io.github.kafkashare.spark.metrics.QueryTotals
import io.github.kafkashare.spark.offsets._
import io.github.kafkashare.spark.options.{AcknowledgmentMode, ShareSourceOptions}
import io.github.kafkashare.spark.reader.{KafkaShareInputPartition, KafkaShareReaderFactory}
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
 * Trigger.AvailableNow ends at the first batch that gets nothing.
 */
final class KafkaShareMicroBatchStream(
    options: ShareSourceOptions,
    checkpointDir: String,
    cluster: ClusterAccess,
    parallelism: Int,
    lockDurationMs: Long,
    hadoopConf: SerializableHadoopConf,
    totals: QueryTotals,
    explicit: Option[ExplicitQueries.Registration])
    extends MicroBatchStream with SupportsAdmissionControl with SupportsTriggerAvailableNow
    with ReportsSourceMetrics with Logging {

  private val acquisitions   = new AcquisitionLog(checkpointDir, hadoopConf)
  private val decisions      = new DecisionLog(checkpointDir, hadoopConf)
  private val commitLogDir   = new Path(new Path(checkpointDir).getParent.getParent, "commits")
  private var topics         = cluster.resolveTopics()
  private var plannedEnds    = Map.empty[(String, Int), Long]
  private var plannedAt      = System.nanoTime
  private var probeWaitMs    = lockDurationMs
  private var lastBatchStats = BatchStats(0, 0, 0)

  override def initialOffset(): Offset = ShareSourceOffset.initial

  override def deserializeOffset(json: String): Offset = ShareSourceOffset.fromJson(json)

  override def getDefaultReadLimit: ReadLimit =
    options.maxRecordsPerTrigger.map(ReadLimit.maxRows).getOrElse(ReadLimit.allAvailable())

  override def prepareForTriggerAvailableNow(): Unit = availableNow = true
  private var availableNow = false

  override def latestOffset(): Offset = throw new UnsupportedOperationException("latestOffset(start, limit) is used")

  override def latestOffset(startOffset: Offset, limit: ReadLimit): Offset = {
    val start   = startOffset.asInstanceOf[ShareSourceOffset]
    val entries = if (start.batch < 0) Nil else acquisitions.readBatch(start.batch, start.tasks)
    lastBatchStats = BatchStats(start.batch, entries.map(_.recordCount).sum,
      entries.flatMap(_.runs).map(_.deliveryCount).maxOption.getOrElse(0))
    if (lastBatchStats.records > 0) probeWaitMs = lockDurationMs
    val batchMs = (System.nanoTime - plannedAt) / 1000000L
    if (options.holdsUntilCommit && start.batch >= 0 && batchMs > lockDurationMs * 0.8)
      logWarning(s"kafka-share: batch ${start.batch} took $batchMs ms, more than 80% of the lock duration " +
        s"($lockDurationMs ms) for which ${holder} holds records. Raise the group's share.record.lock.duration.ms " +
        "(docs/operations.md) or make batches smaller (maxRecordsPerTrigger)")

    val startOffsets = cluster.groupStartOffsets()
    // Records that foreachBatch RELEASEd come back and must be emitted again: not pinned any more.
    val released     = if (explicit.nonEmpty && start.batch >= 0) decisions.released(start.batch) else TopicPartitionRanges.empty
    val pinned       = AcquisitionEntry.offsetsOf(entries, start.pinned).minus(released).dropBelow(startOffsets)
    topics = cluster.resolveTopics()
    val ends = cluster.endOffsets(topics)

    val firstRun = start.batch < 0 || plannedEnds.isEmpty
    val gotSome  = lastBatchStats.records > 0
    val newData  = ends.exists { case (tp, end) => end > plannedEnds.getOrElse(tp, 0L) }
    def holes    = ends.exists { case ((t, p), end) => startOffsets.get((t, p)).exists(s => pinned.hasHoles(t, p, s, end)) }
    def probeDue = (System.nanoTime - plannedAt) / 1000000L >= probeWaitMs && holes
    val run =
      if (availableNow) firstRun || gotSome
      else firstRun || gotSome || newData || probeDue
    if (!run) return start
    if (!firstRun && !gotSome && !newData) {
      logInfo(s"kafka-share: probing for records that came back to group '${options.groupId}'")
      probeWaitMs = math.min(probeWaitMs * 2, KafkaShareMicroBatchStream.MaxProbeWaitMs)
    }

    plannedEnds = ends
    plannedAt = System.nanoTime
    ShareSourceOffset(start.batch + 1, parallelism, pinned)
  }

  // Idle consumers are closed after half a lock duration: what they fetched ahead is locked to them
  // until then, and after a whole lock duration it would be stale anyway.
  private val consumerKey = ConsumerKey(options.groupId, options.kafkaParams, lockDurationMs / 2)

  private def holder = if (explicit.nonEmpty) "explicit acknowledgement" else "two-phase-commit"

  override def planInputPartitions(start: Offset, end: Offset): Array[InputPartition] = {
    val batchEnd = end.asInstanceOf[ShareSourceOffset]
    explicit.foreach { r => r.runningTasks = batchEnd.tasks; r.runningBatch = batchEnd.batch }
    val perTask  = options.maxRecordsPerTrigger.map(m => math.max(1L, (m + batchEnd.tasks - 1) / batchEnd.tasks))
    val key      = consumerKey
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
        includeHeaders = options.includeHeaders,
        failOnDataLoss = options.failOnDataLoss,
        log = acquisitions,
        commitFile = new Path(commitLogDir, batchEnd.batch.toString).toString,
        hadoopConf = hadoopConf,
        totals = totalsOut,
        holdUntilCommit = options.holdsUntilCommit,
        explicitDefault = options.mode match {
          case AcknowledgmentMode.Explicit(default) => Some(default)
          case AcknowledgmentMode.Implicit          => None
        },
        decisions = decisions,
        poison = options.poison): InputPartition
    }.toArray
  }

  override def createReaderFactory(): PartitionReaderFactory = KafkaShareReaderFactory

  override def commit(end: Offset): Unit = {
    // Spark keeps the offset log of the last minBatchesToRetain batches; older batches never re-run.
    val retained = SparkSession.active.conf.get("spark.sql.streaming.minBatchesToRetain", "100").toLong
    acquisitions.purgeBefore(end.asInstanceOf[ShareSourceOffset].batch - retained)
    decisions.purgeBefore(end.asInstanceOf[ShareSourceOffset].batch - retained)
  }

  override def metrics(latestConsumedOffset: util.Optional[Offset]): util.Map[String, String] = {
    val pinnedRanges = if (latestConsumedOffset.isPresent) latestConsumedOffset.get.asInstanceOf[ShareSourceOffset].pinned.rangeCount else 0
    (Map(
      "lastBatch"                -> lastBatchStats.batch.toString,
      "lastBatchRecordsAcquired" -> lastBatchStats.records.toString,
      "lastBatchMaxDeliveryCount" -> lastBatchStats.maxDeliveryCount.toString,
      "pinnedRanges"             -> pinnedRanges.toString,
      "parallelism"              -> parallelism.toString,
      "lockDurationMs"           -> lockDurationMs.toString
    ) ++ totals.asMetrics).asJava
  }

  override def stop(): Unit = {
    explicit.foreach(ExplicitQueries.unregister)
    ShareConsumerPool.closeIdle(consumerKey) // promise 7, where the driver runs the read tasks too
    cluster.close()
  }

  override def toString: String = s"KafkaShareMicroBatchStream[${options.groupId}]"
}

/** What the previous batch pinned, from its log entries. */
final case class BatchStats(batch: Long, records: Long, maxDeliveryCount: Int)

object KafkaShareMicroBatchStream extends Logging {

  /** The longest wait between probe batches that keep finding nothing. */
  val MaxProbeWaitMs: Long = 10 * 60 * 1000L

  /** Checks the cluster, prepares the group, and builds the stream. */
  def start(options: ShareSourceOptions, checkpointDir: String, spark: SparkSession): KafkaShareMicroBatchStream = {
    val cluster = new ClusterAccess(options)
    try {
      cluster.checkShareGroupsServed()
      cluster.resolveTopics()
      cluster.applyStartingOffsets(options.startingOffsets)
      val lockDurationMs = options.lockTimeoutMs.getOrElse(cluster.lockDurationMs())
      val parallelism    = options.parallelism.getOrElse(spark.sparkContext.defaultParallelism)
      val hadoopConf     = new SerializableHadoopConf(spark.sparkContext.hadoopConfiguration)
      logInfo(s"kafka-share: group '${options.groupId}', ${KafkaShareTable.describe(options.subscription)}, " +
        s"strategy ${options.strategy.name}, $parallelism consumers per batch, lock duration $lockDurationMs ms" +
        options.poison.fold("")(p => s", records delivered more than ${p.maxDeliveries} times rejected" +
          p.deadLetterTopic.fold("")(t => s" via '$t'")))
      val explicit = options.mode match {
        case AcknowledgmentMode.Implicit => None
        case AcknowledgmentMode.Explicit(_) =>
          QuerySink.ofCurrentQuery(spark).filterNot(_ == "ForeachBatchSink").foreach { sink =>
            throw ShareSourceErrors.explicitModeNeedsForeachBatch(sink)
          }
          val registration = new ExplicitQueries.Registration(options.groupId,
            new AcquisitionLog(checkpointDir, hadoopConf), new DecisionLog(checkpointDir, hadoopConf))
          ExplicitQueries.register(registration)
          Some(registration)
      }
      new KafkaShareMicroBatchStream(options, checkpointDir, cluster, parallelism, lockDurationMs, hadoopConf,
        new QueryTotals(spark.sparkContext), explicit)
    } catch {
      case e: Throwable => cluster.close(); throw e
    }
  }
}
