package io.github.kafkashare.spark.offsets

import java.io.FileNotFoundException
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.{Files, NoSuchFileException, Paths, StandardCopyOption}
import java.util.UUID

import scala.util.control.NonFatal

import org.apache.hadoop.fs.{CreateFlag, FileAlreadyExistsException, FileContext, Options, Path}

/**
 * How the source's checkpoint logs (acquisitions, decisions) touch files: small text files in one
 * folder per batch, named by the batch number, each written whole or not at all.
 *
 * On the local file system (`file:`) files are read and written with java.nio, not Hadoop's local
 * file system: without Hadoop's native library that one starts a `chmod` process for every file it
 * creates (and its checksum file), about 100 ms a write on a small machine, and a read task writes
 * one entry per poll. Elsewhere (HDFS, cloud stores, DBFS) Hadoop's FileContext is used.
 */
object CheckpointFiles {

  /** The file's text, or None when it does not exist. */
  def read(fc: FileContext, path: Path): Option[String] = local(fc, path) match {
    case Some(file) =>
      try Some(new String(Files.readAllBytes(file), UTF_8))
      catch { case _: NoSuchFileException => None }
    case None =>
      try {
        val in = fc.open(path)
        try Some(new String(in.readAllBytes(), UTF_8))
        finally in.close()
      } catch { case _: FileNotFoundException => None }
  }

  /**
   * Writes `text` to a temporary file beside `path`, then moves it into place, so that a reader sees
   * the whole file or none. Without `overwrite` the move fails with Hadoop's FileAlreadyExistsException
   * when `path` exists (locally a hard link, which the kernel refuses to put over an existing name,
   * atomically); the caller decides what that means. The temporary file is deleted either way.
   */
  def writeAtomically(fc: FileContext, path: Path, text: String, overwrite: Boolean): Unit = local(fc, path) match {
    case Some(file) =>
      Files.createDirectories(file.getParent)
      val temp = file.resolveSibling(s".${file.getFileName}.${UUID.randomUUID()}.tmp")
      Files.write(temp, text.getBytes(UTF_8))
      try {
        if (overwrite) Files.move(temp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE)
        else {
          try Files.createLink(file, temp)
          catch { case _: java.nio.file.FileAlreadyExistsException => throw new FileAlreadyExistsException(path.toString) }
        }
      } finally Files.deleteIfExists(temp)
    case None =>
      fc.mkdir(path.getParent, null, true)
      val temp = new Path(path.getParent, s".${path.getName}.${UUID.randomUUID()}.tmp")
      val out  = fc.create(temp, java.util.EnumSet.of(CreateFlag.CREATE), Options.CreateOpts.createParent())
      try out.write(text.getBytes(UTF_8))
      finally out.close()
      try fc.rename(temp, path, if (overwrite) Options.Rename.OVERWRITE else Options.Rename.NONE)
      catch {
        case e: Throwable =>
          try fc.delete(temp, false)
          catch { case NonFatal(_) => }
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

  /** Deletes a file if it exists. */
  def delete(fc: FileContext, path: Path): Unit = local(fc, path) match {
    case Some(file) => Files.deleteIfExists(file)
    case None =>
      try fc.delete(path, false)
      catch { case _: FileNotFoundException => }
  }

  /** The names in a folder, or none when it does not exist. */
  def list(fc: FileContext, dir: Path): Seq[String] = local(fc, dir) match {
    case Some(folder) =>
      try {
        val s = Files.list(folder);
        try s.toArray.toSeq.map(_.asInstanceOf[java.nio.file.Path].getFileName.toString)
        finally s.close()
      } catch { case _: NoSuchFileException => Nil }
    case None =>
      try {
        val it = fc.listStatus(dir)
        Iterator.continually(it).takeWhile(_.hasNext).map(_.next().getPath.getName).toList
      } catch { case _: FileNotFoundException => Nil }
  }

  private def local(fc: FileContext, path: Path): Option[java.nio.file.Path] = {
    val uri = fc.makeQualified(path).toUri
    if (uri.getScheme == "file") Some(Paths.get(uri)) else None
  }
}
