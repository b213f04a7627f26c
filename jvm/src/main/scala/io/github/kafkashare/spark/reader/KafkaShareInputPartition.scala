package io.github.kafkashare.spark.reader

import io.github.kafkashare.spark.consumer.ConsumerKey
import io.github.kafkashare.spark.metrics.QueryTotalsInTransit
import io.github.kafkashare.spark.offsets.{
  AcquiredRun,
  AcquisitionLog,
  DecisionLog,
  SerializableHadoopConf,
  SourceMarkers,
  TopicPartitionRanges
}
import io.github.kafkashare.spark.options.{Decision, ExactlyOnceStrategy, LockBudget, PoisonPolicy}
import io.github.kafkashare.spark.sparkinternals.CheckpointLayout
import org.apache.hadoop.fs.Path
import org.apache.spark.sql.connector.read.InputPartition

/**
 * Read task `task` of batch `batch`: one share consumer's worth of records, or, when the acquisition
 * log already has this task's entry, exactly the records it names. What every task of the query shares
 * is its [[ReadTaskQuery]]; the rest is this task's.
 *
 * @param pinned      records pinned to earlier batches; an exactly-once strategy drops their redeliveries
 * @param maxRecords  this task's share of maxRecordsPerTrigger
 * @param deliveryLimit the group's delivery count limit: a record delivered that many times is on its last attempt
 * @param totals      the query's totals, which the task adds its figures to
 * @param realTime    Spark's real-time mode: the task polls until Spark ends the batch
 * @param handedOver  records pinned before this task, that it emits first (see [[HandedOver]])
 */
final case class KafkaShareInputPartition(
    query: ReadTaskQuery,
    batch: Long,
    task: Int,
    topics: Seq[String],
    pinned: TopicPartitionRanges,
    maxRecords: Int,
    deliveryLimit: Int,
    totals: QueryTotalsInTransit,
    realTime: Boolean = false,
    handedOver: HandedOver = HandedOver.none
) extends InputPartition {

  /** Spark's commit log file of this batch (two-phase commit waits for it). */
  private[reader] def commitFile: Path = CheckpointLayout.entry(new Path(query.commitLogDir), batch)

  /** What a poll of this task is judged by ([[PollClassification]]), with `shareLeft` records still to emit. */
  private[reader] def pollLimits(shareLeft: Long, maxPollRecords: Int): PollClassification.Limits = PollClassification.Limits(
    deliveryLimit = deliveryLimit,
    maxDeliveries = query.poison.map(_.maxDeliveries),
    dropsRedeliveries = query.strategy.dropsRedeliveries,
    shareLeft = shareLeft,
    holdUntilCommit = query.holdUntilCommit,
    maxPollRecords = maxPollRecords
  )

  // Client settings can hold secrets: never print them.
  override def toString: String = s"KafkaShareInputPartition(batch $batch, task $task, topics ${topics.mkString(",")})"
}

/**
 * What every read task of a query is given alike, batch after batch: how it reads, where it pins, how it
 * acknowledges, and its lock's spans.
 *
 * @param readDurationMs how long a task keeps polling while there is a backlog
 * @param locks       every span timed by the records' lock ([[LockBudget]])
 * @param commitLogDir Spark's commit log (two-phase commit and explicit mode wait for the batch's file)
 * @param holdUntilCommit  keep the records acquired until the batch commits (two-phase commit, explicit mode)
 * @param renewLocks  while held, renew their locks (RENEW, Kafka 4.2+) until the batch commits or the query stops
 * @param explicitDefault  explicit mode: the decision for records foreachBatch did not decide on
 * @param markers     where phase 2 is said done, and where the query says that it stopped
 */
final case class ReadTaskQuery(
    strategy: ExactlyOnceStrategy,
    consumerKey: ConsumerKey,
    pollTimeoutMs: Long,
    readDurationMs: Long,
    locks: LockBudget,
    includeHeaders: Boolean,
    failOnDataLoss: Boolean,
    log: AcquisitionLog,
    commitLogDir: String,
    hadoopConf: SerializableHadoopConf,
    holdUntilCommit: Boolean,
    renewLocks: Boolean,
    explicitDefault: Option[Decision],
    decisions: DecisionLog,
    markers: SourceMarkers,
    poison: Option[PoisonPolicy]
)

/**
 * What a read task emits before it polls, read back by offset: records pinned, and ACCEPTed, before it.
 *
 * @param carried        records a real-time batch before pinned and did not emit (Spark ended its tasks between
 *                       two rows); a micro-batch after a real-time one (the query's trigger changed) emits them too
 * @param earlierRunTasks real time: log tasks of an earlier run of this batch (the query stopped or crashed during
 *                       it, and Spark runs the batch anew from its start): their parts are sealed and replayed here
 */
final case class HandedOver(carried: Seq[AcquiredRun], earlierRunTasks: Seq[Int]) {
  def isEmpty: Boolean = carried.isEmpty && earlierRunTasks.isEmpty
}

object HandedOver {
  val none: HandedOver = HandedOver(Nil, Nil)

  /** `runs` spread over `tasks` tasks, round robin: task i's share. */
  def spread(runs: Seq[AcquiredRun], tasks: Int): Int => Seq[AcquiredRun] = {
    val shares = runs.zipWithIndex.groupBy(_._2 % tasks).map { case (i, rs) => i -> rs.map(_._1) }
    i => shares.getOrElse(i, Nil)
  }
}
