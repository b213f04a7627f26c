package io.github.kafkashare.it.stream

import java.net.URI

import scala.util.matching.Regex

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{DelegateToFileSystem, FileStatus, Path, RawLocalFileSystem}

/**
 * The local disk under the scheme `slowfs:`, whose next listing of a matching folder can be made to
 * take a while ([[SlowListings]]): a checkpoint on a slow store, for steps that must not outlast a lock.
 * Registered in SharedSpark for Hadoop's FileSystem and FileContext APIs (Spark uses both). It counts
 * its instances ([[SlowLocalFileSystem.made]]).
 */
final class SlowLocalFileSystem extends RawLocalFileSystem {
  SlowLocalFileSystem.made.incrementAndGet()

  override def getUri: URI       = SlowLocalFileSystem.Uri
  override def getScheme: String = SlowLocalFileSystem.Scheme
  override def listStatus(folder: Path): Array[FileStatus] = {
    SlowListings.waitIfArmed(folder)
    super.listStatus(folder)
  }
  override def getFileStatus(path: Path): FileStatus = {
    SlowStatus.waitIfSlow(path)
    super.getFileStatus(path)
  }
}

object SlowLocalFileSystem {
  val Scheme = "slowfs"
  val Uri    = URI.create(s"$Scheme:///")

  /**
   * Instances made in this JVM. On S3A or ABFS each instance builds thread and connection pools that
   * are never given back, so a checkpoint store must not make one per task or per check.
   */
  val made = new java.util.concurrent.atomic.AtomicInteger()
}

/** The FileContext side of [[SlowLocalFileSystem]]. */
final class SlowLocalFs(uri: URI, conf: Configuration)
    extends DelegateToFileSystem(uri, new SlowLocalFileSystem, conf, SlowLocalFileSystem.Scheme, false)

/** Makes the next listing of a folder whose path matches a pattern wait, once. */
object SlowListings {
  private var armed: Option[(Regex, Long)] = None

  def slowDownNextListing(folders: Regex, delayMs: Long): Unit = synchronized { armed = Some((folders, delayMs)) }

  /** Whether the armed delay is still waiting for its listing. */
  def pending: Boolean = synchronized(armed.isDefined)

  private[stream] def waitIfArmed(folder: Path): Unit = {
    val delayMs = synchronized {
      armed.collect { case (re, ms) if re.matches(folder.toUri.getPath) => armed = None; ms }
    }
    delayMs.foreach(Thread.sleep)
  }
}

/** Makes every look-up of a file whose path matches a pattern wait, until `reset`: a store slow to answer. */
object SlowStatus {
  @volatile private var slow: Option[(Regex, Long)] = None

  def slowDown(files: Regex, delayMs: Long): Unit = slow = Some((files, delayMs))

  def reset(): Unit = slow = None

  private[stream] def waitIfSlow(file: Path): Unit =
    slow.collect { case (re, ms) if re.matches(file.toUri.getPath) => ms }.foreach(Thread.sleep)
}
