package io.github.kafkashare.spark.planning

import io.github.kafkashare.spark.offsets.SerializableHadoopConf
import io.github.kafkashare.spark.offsets.store.CheckpointStore
import io.github.kafkashare.spark.sparkinternals.{CheckpointLayout, SparkBatchId}
import org.apache.hadoop.fs.Path

/**
 * The id Spark gives the batch whose offsets the source is asked for (in latestOffset), so that a
 * batch of this source carries Spark's id: the one foreachBatch receives, the commit log's file name.
 *
 * Spark does not pass it. It sets a local property on the query's thread when it runs a batch
 * ([[SparkBatchId]]), so while it plans the next one the property holds the last id it ran: the
 * next is one more. Before this run of the query ran any batch, the offset log tells: Spark runs an
 * unfinished last batch again first (without asking the source), so a new batch gets the id after the
 * log's last. And ids only grow: when the source returns a new offset, Spark runs a batch with it.
 *
 * Local properties are inherited by threads: a query started from a thread of another query (from
 * its foreachBatch, say) starts with that query's batch id in the property. So the value the property
 * has when this is built (on the query's thread, before it runs a batch) is not trusted until it changes.
 */
final class SparkBatchIds(offsetLogDir: Path, hadoopConf: SerializableHadoopConf) {

  private val afterOffsetLog: Long =
    CheckpointStore.of(offsetLogDir, hadoopConf.value).list(offsetLogDir).flatMap(CheckpointLayout.batchOf).maxOption.fold(0L)(_ + 1)
  private val inherited = ranByThisThread
  private var trusted   = false
  private var lastGiven = -1L

  /** The id of the batch Spark is about to plan, for a new offset; call on the query's thread. */
  def next(): Long = {
    val ran = ranByThisThread
    if (ran != inherited) trusted = true
    val id = Seq(Some(afterOffsetLog), Some(lastGiven + 1), ran.filter(_ => trusted).map(_ + 1)).flatten.max
    lastGiven = id
    id
  }

  private def ranByThisThread: Option[Long] = SparkBatchId.onThisThread()
}
