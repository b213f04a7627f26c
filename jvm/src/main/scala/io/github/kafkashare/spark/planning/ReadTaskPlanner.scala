package io.github.kafkashare.spark.planning

import io.github.kafkashare.spark.consumer.ConsumerKey
import io.github.kafkashare.spark.metrics.{QueryTotals, QueryTotalsInTransit}
import io.github.kafkashare.spark.offsets.{
  AcquiredRun,
  AcquisitionLog,
  DecisionLog,
  SerializableHadoopConf,
  ShareSourceOffset,
  SourceMarkers,
  TopicPartitionRanges
}
import io.github.kafkashare.spark.options.{AcknowledgmentMode, ShareSourceOptions}
import io.github.kafkashare.spark.reader.{HandedOver, KafkaShareInputPartition, ReadTaskQuery}
import org.apache.hadoop.fs.Path
import org.apache.spark.sql.connector.read.InputPartition

/** The read tasks of a batch: one share consumer each, with everything an executor needs to pin, replay and acknowledge. */
private[planning] final class ReadTaskPlanner(
    options: ShareSourceOptions,
    checkpointDir: String,
    settings: StreamSettings,
    logs: ReadTaskPlanner.Logs,
    totals: QueryTotals
) {

  // A consumer serves one query (its checkpoint): what it fetched ahead, or still has in its buffer, is
  // that query's subscription's. The pool times it by the lock (LockBudget.idleCloseMs).
  val consumerKey: ConsumerKey = ConsumerKey(
    options.groupId,
    settings.clientSettings,
    settings.locks,
    subscription = KafkaShareTable.describe(options.subscription),
    query = checkpointDir,
    renewIdle = settings.features.renew.available
  )

  // Held records keep their locks by RENEW for as long as their batch runs, where the cluster can (BrokerFeatures).
  val renewLocks: Boolean = options.holdsUntilCommit && settings.features.renew.available

  private var firstPlan = true

  /**
   * How many read tasks a new micro-batch gets: `parallelism` (fixed, or auto's choice), or more for the first batch planned after a restart
   * whose id a real-time run used without committing (the trigger changed since): that run's log tasks
   * can go past the parallelism, and each must be replayed by a task of the batch, and counted pinned after it.
   */
  def countFor(batch: Long, parallelism: Int): Int = {
    // One look-up first: the folder of a batch about to be planned exists only after such a run.
    val leftover =
      if (firstPlan && logs.acquisitions.hasBatch(batch)) logs.acquisitions.partNames(batch).map(_._1).maxOption.fold(0)(_ + 1) else 0
    firstPlan = false
    math.max(parallelism, leftover)
  }

  /**
   * A micro-batch's tasks. `carried`: what the real-time batch it starts from pinned and did not emit (the
   * query ran in real time before), emitted first, by every attempt of the batch alike.
   */
  def tasks(
      batchEnd: ShareSourceOffset,
      topics: Seq[String],
      deliveryLimit: Option[Int],
      carried: Seq[AcquiredRun]
  ): Array[InputPartition] = {
    val perTask   = options.maxRecordsPerTrigger.map(ClientSettings.shareOf(_, batchEnd.tasks))
    val totalsOut = totals.inTransit
    val share     = HandedOver.spread(carried, batchEnd.tasks)
    (0 until batchEnd.tasks).map { task =>
      val maxRecords = perTask.map(_.min(Int.MaxValue).toInt)
      partition(
        batchEnd.batch,
        task,
        batchEnd.pinned,
        topics,
        deliveryLimit,
        totalsOut,
        maxRecords,
        realTime = false,
        HandedOver(share(task), Nil)
      )
    }.toArray
  }

  /**
   * Real-time mode: `parallelism` tasks that poll until Spark ends the batch, at log indexes from
   * `firstTask` on (after those of an earlier run of the same batch, whose parts `work(i)` names).
   */
  def realTimeTasks(
      batch: Long,
      firstTask: Int,
      pinned: TopicPartitionRanges,
      topics: Seq[String],
      deliveryLimit: Option[Int],
      work: Int => HandedOver
  ): Array[InputPartition] = {
    val totalsOut = totals.inTransit
    (0 until settings.parallelism).map { i =>
      partition(batch, firstTask + i, pinned, topics, deliveryLimit, totalsOut, None, realTime = true, work(i))
    }.toArray
  }

  private def partition(
      batch: Long,
      task: Int,
      pinned: TopicPartitionRanges,
      topics: Seq[String],
      deliveryLimit: Option[Int],
      totalsOut: QueryTotalsInTransit,
      maxRecords: Option[Int],
      realTime: Boolean,
      handedOver: HandedOver
  ): InputPartition =
    KafkaShareInputPartition(
      query,
      batch = batch,
      task = task,
      topics = topics,
      pinned = pinned,
      maxRecords = maxRecords.getOrElse(Int.MaxValue),
      deliveryLimit = deliveryLimit.getOrElse(Int.MaxValue),
      totals = totalsOut,
      realTime = realTime,
      handedOver = handedOver
    )

  // What every task of the query is given alike (the partitions are serialized with it, one copy per task).
  private val query = ReadTaskQuery(
    strategy = options.strategy,
    consumerKey = consumerKey,
    pollTimeoutMs = options.pollTimeoutMs,
    readDurationMs = options.readDurationMs,
    locks = settings.locks,
    includeHeaders = options.includeHeaders,
    failOnDataLoss = options.failOnDataLoss,
    log = logs.acquisitions,
    commitLogDir = logs.commitLogDir.toString,
    hadoopConf = logs.hadoopConf,
    holdUntilCommit = options.holdsUntilCommit,
    renewLocks = renewLocks,
    explicitDefault = options.mode match {
      case AcknowledgmentMode.Explicit(default) => Some(default)
      case AcknowledgmentMode.Implicit          => None
    },
    decisions = logs.decisions,
    markers = logs.markers,
    poison = options.poison
  )
}

private[planning] object ReadTaskPlanner {

  /** Where the batch's tasks pin, find decisions, mark phase 2, and look for the commit. */
  final case class Logs(
      acquisitions: AcquisitionLog,
      decisions: DecisionLog,
      markers: SourceMarkers,
      commitLogDir: Path,
      hadoopConf: SerializableHadoopConf
  )
}
