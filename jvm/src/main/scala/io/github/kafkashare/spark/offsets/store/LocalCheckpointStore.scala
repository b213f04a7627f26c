package io.github.kafkashare.spark.offsets.store

import java.io.{IOException, UncheckedIOException}
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.{FileAlreadyExistsException, Files, NoSuchFileException, Paths, StandardCopyOption}
import java.util.Comparator
import java.util.UUID

import org.apache.hadoop.fs.Path

/**
 * The local file system (`file:`), read and written with java.nio rather than Hadoop: without
 * Hadoop's native library, Hadoop's local file system starts a `chmod` process for every file it
 * creates (and its checksum file), about 100 ms a write on a small machine, and a read task writes
 * one entry per poll.
 *
 * A file is written to a temporary name, then put in place: by an atomic move to overwrite, by a hard
 * link otherwise, which the kernel refuses atomically when the name exists.
 */
object LocalCheckpointStore extends CheckpointStore {

  def read(path: Path): Option[String] =
    try Some(new String(Files.readAllBytes(local(path)), UTF_8))
    catch { case _: NoSuchFileException => None }

  def exists(path: Path): Boolean = Files.exists(local(path))

  def list(dir: Path): Seq[String] =
    try {
      val s = Files.list(local(dir))
      try s.toArray.toSeq.map(_.asInstanceOf[java.nio.file.Path].getFileName.toString)
      finally s.close()
    } catch { case _: NoSuchFileException => Nil }

  def createIfAbsent(path: Path, text: String): Option[String] = {
    val file = local(path)
    withTemporary(file, text) { temp =>
      try { Files.createLink(file, temp); None }
      catch { case _: FileAlreadyExistsException => Some(read(path).getOrElse(text)) }
    }
  }

  def overwrite(path: Path, text: String): Unit = {
    val file = local(path)
    withTemporary(file, text)(temp => Files.move(temp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE))
  }

  def delete(path: Path): Unit = Files.deleteIfExists(local(path))

  // Best effort: a file that a late writer (a commit watcher of an earlier batch) adds or removes
  // meanwhile fails this folder's deletion, and the next commit tries again.
  def purgeBefore(root: Path, batch: Long): Unit =
    list(root).filter(_.toLongOption.exists(_ < batch)).foreach { name =>
      try {
        val s = Files.walk(local(new Path(root, name)))
        try s.sorted(Comparator.reverseOrder[java.nio.file.Path]()).forEach(p => Files.deleteIfExists(p))
        finally s.close()
      } catch { case _: IOException | _: UncheckedIOException => }
    }

  def createIfAbsentAtomic: Boolean = true
  def createIfAbsentBy: String      = "a hard link (local file system)"

  private def withTemporary[T](file: java.nio.file.Path, text: String)(place: java.nio.file.Path => T): T = {
    Files.createDirectories(file.getParent)
    val temp = file.resolveSibling(s".${file.getFileName}.${UUID.randomUUID()}.tmp")
    Files.write(temp, text.getBytes(UTF_8))
    try place(temp)
    finally Files.deleteIfExists(temp)
  }

  private def local(path: Path): java.nio.file.Path = Paths.get(path.toUri.getPath)
}
