package io.github.kafkashare.spark.offsets.store

import java.io.IOException
import java.nio.charset.StandardCharsets.UTF_8
import java.util.UUID

import scala.util.control.NonFatal

import org.apache.hadoop.fs.{FileAlreadyExistsException, FileSystem, Path}
import org.slf4j.LoggerFactory

/**
 * Create-if-absent on Google Cloud Storage, through Hadoop's GCS connector (`gs:`). A file the
 * connector creates without overwrite is uploaded with the precondition `ifGenerationMatch=0`, and the
 * upload is finalised at `close()`: only then does the object appear, whole, and GCS refuses it (412)
 * when an object with that name appeared meanwhile. So `create(path, overwrite = false)`, the write,
 * and `close()` are one atomic create-if-absent: the loser's `create` fails when the winner's object is
 * already there (FileAlreadyExistsException), or its `close` does (an IOException whose cause is the
 * 412). A rename, by contrast, is a check followed by a copy on GCS.
 *
 * [[of]] trusts the connector only after a probe: two writers open the same new name, both write, and
 * the second to close must be refused (an emulator or another connector version may not send the
 * precondition). Never hflush or hsync these streams: the connector then commits the object early.
 */
private[store] final class GcsCreateNew private (fs: FileSystem) {

  /** Writes `bytes` to `path` unless an object is there or appears before the upload ends; an IOException then. */
  def createIfAbsent(path: Path, bytes: Array[Byte]): Unit = {
    val out = fs.create(path, false)
    // On a failed write, no close(): it would finalise the upload with part of the text. Left open, the
    // resumable upload is never finalised and no object appears.
    out.write(bytes)
    out.close()
  }
}

private[store] object GcsCreateNew {

  private val log = LoggerFactory.getLogger(classOf[GcsCreateNew])

  /** The GCS connector's scheme. */
  val Scheme = "gs"

  /** Create-if-absent through the create of `fs`, when it is GCS and refuses the second of two racing uploads. */
  def of(fs: FileSystem, near: Path): Option[GcsCreateNew] =
    Option.when(fs.getScheme == Scheme && refusesSecondUpload(fs, near))(new GcsCreateNew(fs))

  // Both streams are open before either closes, so both passed the connector's check that the name is
  // free: only the precondition of the upload can refuse the second. Refused means a 412 (or the
  // connector's FileAlreadyExistsException), not any failure: a throttled or failed upload proves nothing.
  private def refusesSecondUpload(fs: FileSystem, near: Path): Boolean = {
    val probe =
      new Path(Option(near.getParent).getOrElse(near), s"${near.getName}.kafka-share-create-new-probe-${UUID.randomUUID()}")
    var open = List.empty[java.io.OutputStream]
    try {
      val first = fs.create(probe, false)
      open = List(first)
      val second = fs.create(probe, false)
      open = List(first, second)
      first.write("first".getBytes(UTF_8))
      second.write("second".getBytes(UTF_8))
      open = List(second)
      first.close()
      open = Nil
      try {
        second.close()
        log.warn(
          s"kafka-share: two uploads of $probe both succeeded: the store ignores ifGenerationMatch; the source's logs are written by rename"
        )
        false
      } catch {
        case e: IOException if refusedAsExisting(e) => true
      }
    } catch {
      case NonFatal(e) =>
        log.warn(s"kafka-share: the store of $near could not be probed for create-if-absent ($e); the source's logs are written by rename")
        false
    } finally {
      // A stream left open keeps its upload thread waiting for the rest of the data.
      open.foreach(out =>
        try out.close()
        catch { case NonFatal(_) => }
      )
      try fs.delete(probe, false)
      catch { case NonFatal(_) => }
    }
  }

  /** The store refused the upload because the object exists: a FileAlreadyExistsException or a 412 in the causes. */
  private def refusedAsExisting(e: Throwable): Boolean =
    Iterator.iterate(e)(_.getCause).takeWhile(_ != null).take(10).exists {
      case _: FileAlreadyExistsException => true
      case other                         => Option(other.getMessage).exists(m => m.contains("412") || m.contains("Precondition Failed"))
    }
}
