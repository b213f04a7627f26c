package io.github.kafkashare.spark.offsets

import io.github.kafkashare.spark.offsets.store.CheckpointStore
import org.apache.hadoop.fs.Path

/**
 * The acquisition log under the source's checkpoint directory: `acquisitions/<batch>/<task>` for a
 * task's first part, `acquisitions/<batch>/<task>.<part>` for the parts after it.
 *
 * A read task may poll several times; each poll's records are pinned as one part, written once,
 * atomically and only if absent ([[CheckpointStore.createIfAbsent]]), BEFORE the records it names
 * are acknowledged: that order is what makes a batch replayable.
 *
 * A task's records are its parts 0, 1, ... up to the first part that is missing or empty. An empty
 * part is a seal: nothing after it belongs to the task. A second attempt of a task (a retry, a
 * speculative copy) that finds part 0 written replays instead of polling, and first seals the task
 * ([[sealTask]]), so that the attempt it replaces, if still alive, can pin nothing more: that
 * attempt's next write finds the part taken, and it must stop. Two fresh attempts race only for part 0;
 * the loser gives its records back and replays.
 *
 * @param checkpointDir the source's checkpoint directory (`<checkpointLocation>/sources/<id>`)
 */
final class AcquisitionLog(checkpointDir: String, hadoopConf: SerializableHadoopConf) extends Serializable {

  @transient private lazy val root  = new Path(checkpointDir, "acquisitions")
  @transient private lazy val store = CheckpointStore.of(root, hadoopConf.value)

  def path(batch: Long, task: Int, part: Int = 0): Path =
    new Path(new Path(root, batch.toString), if (part == 0) task.toString else s"$task.$part")

  def read(batch: Long, task: Int, part: Int = 0): Option[AcquisitionEntry] = {
    val file = path(batch, task, part)
    store.read(file).map(AcquisitionEntry.parse(_, file.toString))
  }

  /**
   * Writes the part unless one exists. Returns the entry that is in the log afterwards, and whether
   * it is ours.
   *
   * A part that was there is ours only after part 0 and only with our records: parts after 0 are
   * written with records by the attempt that won part 0 and by no other (the others only seal), so
   * that is our own write whose answer was lost (a PUT retried by the client, refused the second
   * time). Part 0 that was there is never ours, even with the same text: a broker gives the records of
   * a departed member to the next one with the delivery count they had, so two attempts can pin the
   * same text. Taking our own part 0 for another's is safe: the attempt releases its records and
   * replays them.
   */
  def writeIfAbsent(batch: Long, task: Int, entry: AcquisitionEntry, part: Int = 0): (AcquisitionEntry, Boolean) = {
    val file = path(batch, task, part)
    val text = entry.serialize
    store.createIfAbsent(file, text) match {
      case None                                                            => (entry, true)
      case Some(there) if part > 0 && entry.runs.nonEmpty && there == text => (entry, true)
      case Some(there)                                                     => (AcquisitionEntry.parse(there, file.toString), false)
    }
  }

  /**
   * The parts of a task written so far (up to the first missing or empty one), or None when the task
   * has no part 0: no attempt pinned anything for it yet.
   */
  def readTask(batch: Long, task: Int): Option[Seq[AcquisitionEntry]] =
    read(batch, task).map { first =>
      if (first.runs.isEmpty) Nil
      else first +: Iterator.from(1).map(read(batch, task, _)).takeWhile(_.exists(_.runs.nonEmpty)).flatten.toList
    }

  /**
   * Ends a task that has a part 0: writes the empty part after its last one, unless a part is written
   * there meanwhile (then it looks further). Returns the task's parts, final from now on.
   */
  def sealTask(batch: Long, task: Int): Seq[AcquisitionEntry] = {
    val parts = Vector.newBuilder[AcquisitionEntry]
    var part  = 0
    var open  = true
    while (open) {
      val (entry, _) = read(batch, task, part) match {
        case Some(existing) => (existing, false)
        case None           => writeIfAbsent(batch, task, AcquisitionEntry.empty, part)
      }
      if (entry.runs.isEmpty) open = false else { parts += entry; part += 1 }
    }
    parts.result()
  }

  /**
   * The non-empty parts of `batch` written so far, of the tasks `ofTask` selects. A read task
   * consults its siblings' parts before it pins a record: after a pause longer than a lock, or a
   * departing member's release, a record one task pinned can come back to a sibling of the same batch,
   * whose pinned set (earlier batches only) does not name it.
   */
  def partsOf(batch: Long, ofTask: Int => Boolean = _ => true): Seq[AcquisitionEntry] =
    partNames(batch).filter(n => ofTask(n._1)).flatMap { case (t, p) => read(batch, t, p) }.filter(_.runs.nonEmpty)

  /** Whether any task of `batch` wrote a part (one look-up, not a listing). */
  def hasBatch(batch: Long): Boolean = store.exists(new Path(root, batch.toString))

  /**
   * The batches a task wrote a part of, not yet purged (one listing). Spark's batch ids skip where this source
   * ran no task (a batch of another source of the query, one that only moves a watermark): these are the
   * source's own.
   */
  def batches: Seq[Long] = store.list(root).flatMap(_.toLongOption).sorted

  /** (task, part) of every part of `batch` written so far, in order. */
  def partNames(batch: Long): Seq[(Int, Int)] =
    store.list(new Path(root, batch.toString)).flatMap(AcquisitionLog.taskAndPart).sorted

  /** All records of one batch, as the parts of its tasks (the driver reads them after the batch ran). */
  def readBatch(batch: Long, tasks: Int): Seq[AcquisitionEntry] =
    (0 until tasks).flatMap(readTask(batch, _).getOrElse(Nil))

  /** Deletes the entries of batches before `batch` (their offsets are no longer replayable by Spark). */
  def purgeBefore(batch: Long): Unit = store.purgeBefore(root, batch)
}

object AcquisitionLog {
  private val PartName = """(\d+)(?:\.(\d+))?""".r

  /** `3` is task 3's part 0, `3.2` its part 2; anything else (temporary files) is no part. */
  def taskAndPart(fileName: String): Option[(Int, Int)] = fileName match {
    case PartName(task, null) => task.toIntOption.map(_ -> 0)
    case PartName(task, part) => for { t <- task.toIntOption; p <- part.toIntOption } yield (t, p)
    case _                    => None
  }
}
