package io.github.kafkashare.spark.offsets

import io.github.kafkashare.spark.offsets.store.CheckpointStore
import org.apache.hadoop.fs.Path

/**
 * Empty files under the source's checkpoint directory by which the driver and the executors of one
 * query tell each other what they cannot see (on a cluster they share no memory):
 *  - `acknowledged/<batch>/<task>`: phase 2 of that task's held records is done (two-phase commit,
 *    explicit mode), written by the executor's commit watcher. The driver waits for these before a
 *    query that ends (Trigger.AvailableNow, a stop) lets the application go on to stop its executors.
 *  - `stopping`: Spark began to stop the query (its stream thread was interrupted) and has not yet
 *    stopped the source: a foreachBatch may still be running, and any read it starts now belongs to a
 *    batch that will never commit. Read tasks that would acquire records refuse from then on; replays
 *    of pinned parts go on. Written by the driver's [[io.github.kafkashare.spark.planning.StopWatch]].
 *  - `stopped`: the query stopped. Executors close its idle pooled consumers, so that what they
 *    fetched ahead goes back to the group at once (delivery contract, promise 7), and end its holds.
 *    The driver removes both when the query starts again.
 *  - `fetched-while-idle`: an executor's idle consumer of this query acquired records that no batch
 *    took (ShareConsumerPool). The driver runs a batch at its next trigger, even if it sees nothing
 *    new, and removes the file.
 *
 * @param checkpointDir the source's checkpoint directory (`<checkpointLocation>/sources/<id>`)
 */
final class SourceMarkers(checkpointDir: String, hadoopConf: SerializableHadoopConf) extends Serializable {

  @transient private lazy val store = CheckpointStore.of(new Path(checkpointDir), hadoopConf.value)

  private def acknowledgedRoot                         = new Path(checkpointDir, "acknowledged")
  private def stoppedFile                              = new Path(checkpointDir, "stopped")
  private def acknowledgedFile(batch: Long, task: Int) = new Path(new Path(acknowledgedRoot, batch.toString), task.toString)

  def markAcknowledged(batch: Long, task: Int): Unit =
    store.overwrite(acknowledgedFile(batch, task), "")

  def acknowledged(batch: Long, task: Int): Boolean = exists(acknowledgedFile(batch, task))

  def purgeBefore(batch: Long): Unit = store.purgeBefore(acknowledgedRoot, batch)

  // A stop the stream thread's watch missed is a stop all the same: `stopping` goes up with it.
  def markStopped(): Unit = { store.overwrite(stoppingFile, ""); store.overwrite(stoppedFile, "") }

  private def stoppingFile = new Path(checkpointDir, "stopping")

  def markStopping(): Unit = store.overwrite(stoppingFile, "")

  def clearStopped(): Unit = { store.delete(stoppingFile); store.delete(stoppedFile) }

  def stopped: Boolean = exists(stoppedFile)

  /** Whether Spark began to stop the query, or stopped it (one look-up). */
  def stopping: Boolean = exists(stoppingFile)

  private def fetchedWhileIdleFile = new Path(checkpointDir, "fetched-while-idle")

  def markFetchedWhileIdle(): Unit = store.overwrite(fetchedWhileIdleFile, "")

  /** Whether an executor said so since the last call (which clears it). */
  def takeFetchedWhileIdle(): Boolean = exists(fetchedWhileIdleFile) && { store.delete(fetchedWhileIdleFile); true }

  /** Whether any file of this query's checkpoint exists (Spark's commit log, for example). */
  def exists(file: Path): Boolean = store.exists(file)
}
