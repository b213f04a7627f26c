package io.github.kafkashare.spark.planning

import io.github.kafkashare.spark.offsets.{AcquisitionLog, ShareSourceOffset}
import io.github.kafkashare.spark.options.{ShareSourceOptions, Subscription}
import io.github.kafkashare.spark.sparkinternals.SparkBatchId
import org.apache.spark.internal.Logging
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.connector.read.InputPartition
import org.apache.spark.sql.connector.read.streaming.{Offset, PartitionOffset}

/**
 * Real time's own part of the driver (Spark 4.1+), once Spark said so (before the first batch): each batch's
 * read tasks from its start, after the planning step both modes share ([[BatchPlanning]]), and its end from
 * what the tasks report ([[RealTimeBatches]]). Built on entering the mode: checks first what the query asks
 * against what real time can hold.
 */
final class RealTimePlanning private[planning] (
    options: ShareSourceOptions,
    parallelism: Int,
    acquisitions: AcquisitionLog,
    planning: BatchPlanning,
    readTasks: ReadTaskPlanner,
    sparkBatchIds: SparkBatchIds,
    cluster: ClusterView
) extends Logging {

  RealTimeBatches.check(options, parallelism, SparkSession.active)
  private val batches = new RealTimeBatches(options.groupId, parallelism, acquisitions)
  logInfo(s"kafka-share: group '${options.groupId}': Spark's real-time mode, $parallelism read tasks " +
    "polling for the whole of each batch" +
    (if (options.elastic.nonEmpty) " (kafka.share.parallelism=auto: real time runs the most, and keeps it from batch to batch)" else ""))

  private val lookAhead = new LookAhead(cluster, options.groupId, patterned = options.subscription.isInstanceOf[Subscription.TopicPattern])
  planning.readBacklogAgeWith(lookAhead)
  lookAhead.start()

  // Spark may plan a batch's scan more than once: the same tasks each time (the log is the same until they run).
  private var lastPlanned = Option.empty[((Long, ShareSourceOffset), Array[InputPartition])]

  /** The read tasks of the batch Spark runs now, from `startOffset` (it knows no end yet). */
  def partitions(startOffset: Offset): Array[InputPartition] = {
    val began = System.nanoTime
    val start = ShareSourceOffset.of(startOffset)
    // Spark sets the batch's id on the query's thread before it plans the batch's scan, where real time asks.
    val batch = SparkBatchId.onThisThread().getOrElse(sparkBatchIds.next())
    lastPlanned match {
      case Some((planned, partitions)) if planned == (batch, start) => return partitions
      case _                                                        =>
    }
    val (entries, released) = planning.previousOf(start)
    val read                = System.nanoTime
    val seen                = lookAhead.take()
    lookAhead.start() // the next batch's, made while this one runs (before the backlog's age is read)
    val lookedAt = System.nanoTime
    planning.useTopicsOf(seen)
    val topics = planning.topics
    // A pattern that matches nothing yet: the tasks wait out the batch (a topic may appear by the next).
    val looked = if (topics.isEmpty) None else Some(planning.look(start, entries, released, seen))
    if (looked.isEmpty) planning.noTopic()
    val pinned  = looked.fold(start.pinned)(_.pinned)
    val keptIds = planning.planned(start, pinned, looked.fold(Map.empty[String, String])(_.now.ids))
    val plan    = batches.plan(start, batch, pinned, planning.identity.clusterId, keptIds)
    val tasks   = readTasks.realTimeTasks(plan.end.batch, plan.firstTask, pinned, topics, planning.deliveryLimitNow, plan.work)
    lastPlanned = Some(((batch, start), tasks))
    def ms(from: Long, to: Long) = (to - from) / 1000000L
    logInfo(s"kafka-share: real-time batch $batch planned in ${ms(began, System.nanoTime)} ms (the earlier batches' pins " +
      s"${ms(began, read)} ms, the cluster ${ms(read, lookedAt)} ms)")
    tasks
  }

  /** The query stops: the look-ahead's thread ends. */
  def stop(): Unit = lookAhead.close()

  /** The end of the batch that ran, from its tasks' ends (Spark writes it to its offset log). */
  def end(taskEnds: Array[PartitionOffset]): Offset = {
    val ended = batches.end(taskEnds.toSeq)
    planning.lastBatch = BatchStats(ended.batch, batches.lastPinned, 0)
    lookAhead.batchEnded(() => planning.previousOf(ended)) // the next batch starts from `ended`
    ended
  }
}
