package io.github.kafkashare.spark.offsets

import java.io.FileNotFoundException
import java.nio.charset.StandardCharsets.UTF_8
import java.util.UUID

import scala.util.control.NonFatal

import org.apache.hadoop.fs.{CreateFlag, FileContext, Options, Path}

/**
 * How the source's checkpoint logs (acquisitions, decisions) touch files: small text files in one
 * folder per batch, named by the batch number, each written whole or not at all.
 */
object CheckpointFiles {

  /** The file's text, or None when it does not exist. */
  def read(fc: FileContext, path: Path): Option[String] =
    try {
      val in = fc.open(path)
      try Some(new String(in.readAllBytes(), UTF_8)) finally in.close()
    } catch { case _: FileNotFoundException => None }

  /**
   * Writes `text` to a temporary file beside `path`, then renames it into place, so that a reader
   * sees the whole file or none. Without `overwrite` the rename fails when `path` exists, and its
   * error reaches the caller, who decides what that means; the temporary file is deleted either way.
   */
  def writeAtomically(fc: FileContext, path: Path, text: String, overwrite: Boolean): Unit = {
    fc.mkdir(path.getParent, null, true)
    val temp = new Path(path.getParent, s".${path.getName}.${UUID.randomUUID()}.tmp")
    val out  = fc.create(temp, java.util.EnumSet.of(CreateFlag.CREATE), Options.CreateOpts.createParent())
    try out.write(text.getBytes(UTF_8)) finally out.close()
    try fc.rename(temp, path, if (overwrite) Options.Rename.OVERWRITE else Options.Rename.NONE)
    catch {
      case e: Throwable =>
        try fc.delete(temp, false) catch { case NonFatal(_) => }
        throw e
    }
  }

  /** Deletes the folders of batches before `batch` under `root` (Spark will never re-run them). */
  def purgeBefore(fc: FileContext, root: Path, batch: Long): Unit =
    try {
      val it = fc.listStatus(root)
      while (it.hasNext) {
        val status = it.next()
        status.getPath.getName.toLongOption.filter(_ < batch).foreach(_ => fc.delete(status.getPath, true))
      }
    } catch { case _: FileNotFoundException => }
}
