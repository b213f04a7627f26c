package io.github.kafkashare.spark.sparkinternals

import org.apache.spark.sql.SparkSession

/**
 * The id of the batch Spark runs on this thread. Spark does not pass it to a source: it sets the local
 * property `streaming.sql.batchId` (MicroBatchExecution.BATCH_ID_KEY, an internal constant, so here by
 * value) on the query's thread before it plans a batch, and it stays there until the next one.
 */
object SparkBatchId {

  val Property = "streaming.sql.batchId"

  /** The last batch id Spark set on this thread, if any. */
  def onThisThread(): Option[Long] =
    Option(SparkSession.active.sparkContext.getLocalProperty(Property)).flatMap(_.toLongOption)
}
