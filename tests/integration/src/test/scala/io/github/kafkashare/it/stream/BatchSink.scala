package io.github.kafkashare.it.stream

import java.util.concurrent.ConcurrentHashMap

import scala.jdk.CollectionConverters._

import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.functions.{col, spark_partition_id}

/** One record as the sink received it; `task` is the read task (Spark partition) that emitted it. */
final case class LandedRow(key: String, topic: String, partition: Int, offset: Long, deliveryCount: Int, task: Int)

/**
 * What a test does inside foreachBatch besides writing: a failure to inject (FailureCellsSuite), a
 * second action on the batch. `read` may change the batch's rows before they are collected.
 */
trait BatchHook {
  def read(rows: DataFrame, batchId: Long): DataFrame = rows
  def afterWrite(batchId: Long): Unit                 = ()
}

object BatchHook {
  val none: BatchHook = new BatchHook {}
}

/**
 * A foreachBatch sink in memory: batch N replaces what an earlier run of batch N wrote, an idempotent
 * sink per batch id as the delivery contract assumes (pytest's suites write Parquet the same way).
 */
final class BatchSink(initialHook: BatchHook = BatchHook.none) {

  /** What foreachBatch does besides writing; a restart with changed options may change it (explicit mode's decisions). */
  @volatile var hook: BatchHook = initialHook

  private val batches = new ConcurrentHashMap[Long, Vector[LandedRow]]()

  def write(batch: DataFrame, batchId: Long): Unit = {
    val selected =
      batch.select(
        col("key").cast("string").as("key"),
        col("topic"),
        col("partition"),
        col("offset"),
        col("deliveryCount"),
        spark_partition_id().as("task")
      )
    val hook = this.hook
    val rows = hook.read(selected, batchId).collect()
      .map(r => LandedRow(r.getString(0), r.getString(1), r.getInt(2), r.getLong(3), r.getInt(4), r.getInt(5)))
    batches.put(batchId, rows.toVector)
    hook.afterWrite(batchId)
  }

  /** Every batch written: its id and rows (its last run's). */
  def written: Map[Long, Vector[LandedRow]] = batches.asScala.toMap

  /** What an earlier application's sink held (a checkpoint fixture's): batch id to its rows. */
  def restore(landed: Map[Long, Vector[LandedRow]]): Unit = landed.foreach { case (batch, rows) => batches.put(batch, rows) }

  /** Every row landed, in batch order. */
  def rows: Vector[LandedRow] = batches.asScala.toVector.sortBy(_._1).flatMap(_._2)

  /** The rows batch `batchId` landed (its last run's). */
  def rowsOf(batchId: Long): Vector[LandedRow] = Option(batches.get(batchId)).getOrElse(Vector.empty)

  def distinctKeys: Int = rows.map(_.key).distinct.size

  /** The highest batch id written, -1 before the first. */
  def lastBatch: Long = batches.asScala.keys.maxOption.getOrElse(-1L)

  /** Rows per batch, for batches that landed any, in batch order. */
  def batchSizes: Seq[Int] = batches.asScala.toSeq.sortBy(_._1).map(_._2.size).filter(_ > 0)
}
