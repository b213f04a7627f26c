package io.github.kafkashare.spark.offsets

import org.apache.hadoop.fs.{FileAlreadyExistsException, FileContext, Path}

/**
 * The acquisition log under the source's checkpoint directory: `acquisitions/<batch>/<task>`.
 *
 * An entry is written once, atomically (temporary file, then a rename that refuses to overwrite),
 * BEFORE the records it names are acknowledged: that order is what makes a batch replayable. A
 * second writer of the same entry (a speculative or zombie attempt) loses the rename and must use
 * the entry that won.
 *
 * @param checkpointDir the source's checkpoint directory (`<checkpointLocation>/sources/<id>`)
 */
final class AcquisitionLog(checkpointDir: String, hadoopConf: SerializableHadoopConf) extends Serializable {

  @transient private lazy val root = new Path(checkpointDir, "acquisitions")
  @transient private lazy val fc   = FileContext.getFileContext(root.toUri, hadoopConf.value)

  def path(batch: Long, task: Int): Path = new Path(new Path(root, batch.toString), task.toString)

  def read(batch: Long, task: Int): Option[AcquisitionEntry] = {
    val file = path(batch, task)
    CheckpointFiles.read(fc, file).map(AcquisitionEntry.parse(_, file.toString))
  }

  /** Writes the entry unless one exists. Returns the entry that is in the log afterwards, and whether it is ours. */
  def writeIfAbsent(batch: Long, task: Int, entry: AcquisitionEntry): (AcquisitionEntry, Boolean) = {
    val file = path(batch, task)
    try {
      CheckpointFiles.writeAtomically(fc, file, entry.serialize, overwrite = false)
      (entry, true)
    } catch {
      case _: FileAlreadyExistsException | _: org.apache.hadoop.fs.ParentNotDirectoryException =>
        (read(batch, task).getOrElse(entry), false)
      case e: java.io.IOException if fc.util.exists(file) =>
        // Some file systems report an existing target with a plain IOException.
        (read(batch, task).getOrElse(throw e), false)
    }
  }

  /**
   * The entries other tasks of `batch` have written so far. A read task consults them before it pins
   * a redelivered record: after a pause longer than a lock, a record one task pinned can come back to
   * a sibling of the same batch, whose pinned set (earlier batches only) does not name it.
   */
  def siblingsOf(batch: Long, task: Int): Seq[AcquisitionEntry] = {
    val dir = new Path(root, batch.toString)
    val tasks = try {
      val it = fc.listStatus(dir)
      Iterator.continually(it).takeWhile(_.hasNext).map(_.next().getPath.getName.toIntOption).flatten.toList
    } catch { case _: java.io.FileNotFoundException => Nil }
    tasks.filter(_ != task).sorted.flatMap(read(batch, _))
  }

  /** All entries of one batch (the driver reads them after the batch ran). */
  def readBatch(batch: Long, tasks: Int): Seq[AcquisitionEntry] = (0 until tasks).flatMap(read(batch, _))

  /** Deletes the entries of batches before `batch` (their offsets are no longer replayable by Spark). */
  def purgeBefore(batch: Long): Unit = CheckpointFiles.purgeBefore(fc, root, batch)
}
