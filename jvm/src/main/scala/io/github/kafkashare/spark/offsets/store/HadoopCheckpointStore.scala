package io.github.kafkashare.spark.offsets.store

import java.io.{FileNotFoundException, IOException}
import java.nio.charset.StandardCharsets.UTF_8

import io.github.kafkashare.spark.sparkinternals.SparkCheckpointFileManager
import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{FileSystem, Path}

/**
 * Every file system but the local one (HDFS, S3A, ABFS, GCS, DBFS...), through Spark's
 * CheckpointFileManager: the manager Spark's own checkpoint logs use, so that a vendor's manager
 * (`spark.sql.streaming.checkpointFileManagerClass`) applies to the source's logs too.
 *
 * [[createIfAbsent]] must let one of two racing writers win. The manager writes a temporary file and
 * renames it without overwrite: one atomic step on HDFS and ABFS with a hierarchical namespace, but on
 * S3 and GCS a rename is a check followed by a copy, and two writers can both pass the check. Where
 * the file system offers a conditional write (S3A on Hadoop 3.4.2 and later: a PUT with
 * `If-None-Match: *`, which the store itself refuses when the object exists), that is used instead;
 * on older S3A (Spark 4.0's Hadoop 3.4.1) the same PUT goes through S3A's own client
 * ([[S3ConditionalPut]]); on GCS the connector's create without overwrite is such a write
 * ([[GcsCreateNew]]). Where none holds, [[createIfAbsentAtomic]] is false and the driver warns at start
 * (docs/internals/checkpoints.md). A manager the user set is trusted instead (see [[apply]]).
 */
final class HadoopCheckpointStore private (
    manager: SparkCheckpointFileManager,
    fs: FileSystem,
    conditional: Boolean,
    s3Put: Option[S3ConditionalPut],
    gcsCreate: Option[GcsCreateNew],
    chosenManager: Boolean
) extends CheckpointStore {

  def read(path: Path): Option[String] =
    try {
      val in = manager.open(path)
      try Some(new String(in.readAllBytes(), UTF_8))
      finally in.close()
    } catch { case _: FileNotFoundException => None }

  def exists(path: Path): Boolean = manager.exists(path)

  def list(dir: Path): Seq[String] =
    try manager.list(dir).toSeq.map(_.getPath.getName)
    catch { case _: FileNotFoundException => Nil }

  def createIfAbsent(path: Path, text: String): Option[String] = {
    val bytes = text.getBytes(UTF_8)
    try {
      if (conditional) {
        val out = fs.createFile(path).overwrite(false).must(HadoopCheckpointStore.ConditionalOverwrite, true).recursive().build()
        try out.write(bytes)
        catch { case e: Throwable => out.abort(); throw e } // close() would PUT a part of the text
        out.close() // the PUT, refused by the store when the object exists
      } else if (s3Put.isDefined) {
        s3Put.get.putIfAbsent(path, bytes)
      } else if (gcsCreate.isDefined) {
        gcsCreate.get.createIfAbsent(path, bytes)
      } else {
        val out = createAtomic(path, overwrite = false)
        try out.write(bytes)
        catch { case e: Throwable => manager.cancel(out); throw e }
        out.close() // the rename, refused when the file exists
      }
      None
    } catch {
      // Stores word "it exists" differently (FileAlreadyExistsException, a 412 as an IOException): what
      // is there decides. Nothing there means the write failed for another reason.
      case e: IOException => Some(read(path).getOrElse(throw e))
    }
  }

  def overwrite(path: Path, text: String): Unit = {
    val out = createAtomic(path, overwrite = true)
    try out.write(text.getBytes(UTF_8))
    catch { case e: Throwable => manager.cancel(out); throw e }
    out.close()
  }

  def delete(path: Path): Unit = manager.delete(path)

  // The manager writes the temporary file beside the final one, into a folder that must exist (a
  // batch's first file makes it): made on demand, not checked before every write.
  private def createAtomic(path: Path, overwrite: Boolean) =
    try manager.createAtomic(path, overwrite)
    catch {
      case _: FileNotFoundException =>
        manager.mkdirs(path.getParent)
        manager.createAtomic(path, overwrite)
    }

  // Best effort, as on the local disk: the next commit tries again.
  def purgeBefore(root: Path, batch: Long): Unit =
    list(root).filter(_.toLongOption.exists(_ < batch)).foreach { name =>
      try manager.delete(new Path(root, name))
      catch { case _: IOException => }
    }

  def createIfAbsentAtomic: Boolean =
    conditional || s3Put.isDefined || gcsCreate.isDefined || chosenManager || !HadoopCheckpointStore.RenameIsCopy(fs.getScheme)

  def createIfAbsentBy: String =
    if (conditional) s"a conditional write (${fs.getScheme}: the store refuses to replace an object)"
    else if (s3Put.isDefined) s"a conditional write through the S3 client (${fs.getScheme}: the store refuses to replace an object)"
    else if (gcsCreate.isDefined) s"a create without overwrite (${fs.getScheme}: an upload on condition that no object has the name)"
    else if (chosenManager) s"the chosen checkpoint file manager ${manager.name}, without overwrite"
    else s"a rename without overwrite (${manager.name} on ${fs.getScheme}:)"
}

object HadoopCheckpointStore {

  /** Hadoop's createFile option for a write that fails when the object exists (Hadoop 3.4.2, S3A). */
  val ConditionalOverwrite = "fs.option.create.conditional.overwrite"

  /** Object stores whose rename is a check followed by a copy. */
  private val RenameIsCopy = Set("s3", "s3a", "s3n", "gs", "oss", "cos", "cosn", "obs", "wasb", "wasbs")

  /**
   * A manager the user chose (`spark.sql.streaming.checkpointFileManagerClass`) does every write,
   * create-if-absent included, and is trusted to make it atomic: that is what such managers are for.
   */
  def apply(path: Path, conf: Configuration): HadoopCheckpointStore = {
    val fs          = path.getFileSystem(conf)
    val chosen      = conf.get(SparkCheckpointFileManager.ClassConf, "").nonEmpty
    val conditional = !chosen && fs.hasPathCapability(path, ConditionalOverwrite)
    val s3Put       = if (chosen || conditional) None else S3ConditionalPut.of(fs, path)
    val gcsCreate   = if (chosen || conditional) None else GcsCreateNew.of(fs, path)
    new HadoopCheckpointStore(SparkCheckpointFileManager.create(path, conf), fs, conditional, s3Put, gcsCreate, chosen)
  }
}
