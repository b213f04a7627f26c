package io.github.kafkashare.spark.offsets.store

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{FileSystem, Path}
import io.github.kafkashare.spark.sparkinternals.SparkCheckpointFileManager
import org.apache.hadoop.security.UserGroupInformation

/**
 * How the source's checkpoint logs (acquisitions, decisions, markers) touch files: small text files
 * in one folder per batch, each written whole or not at all.
 *
 * One store per file system (scheme and authority: `file:`, one HDFS cluster, one bucket) and JVM,
 * made on first use and kept: a store holds a Hadoop file system, and on object stores (S3A, ABFS)
 * each new one builds thread and connection pools that are never given back. Read tasks, commit
 * watchers and the driver all share it.
 */
trait CheckpointStore {

  /** The file's text, or None when it does not exist. */
  def read(path: Path): Option[String]

  def exists(path: Path): Boolean

  /** The names in a folder, or none when it does not exist. */
  def list(dir: Path): Seq[String]

  /**
   * Writes `text` to `path` unless a file is there, as ONE atomic step: of several writers racing for
   * one name (two attempts of a task), exactly one succeeds. Returns None when this call wrote the
   * file, or the text of the file that was there. A caller that finds its own text there (a write
   * retried after a lost answer) wrote it.
   */
  def createIfAbsent(path: Path, text: String): Option[String]

  /** Writes `text` to `path`, replacing a file that is there; a reader sees the old file or the new one. */
  def overwrite(path: Path, text: String): Unit

  /** Deletes a file if it exists. */
  def delete(path: Path): Unit

  /** Deletes the folders of batches before `batch` under `root` (Spark will never re-run them). */
  def purgeBefore(root: Path, batch: Long): Unit

  /** Whether [[createIfAbsent]] is one atomic step on this store (else the driver warns at start). */
  def createIfAbsentAtomic: Boolean

  /** How this store makes [[createIfAbsent]] atomic, for the log. */
  def createIfAbsentBy: String
}

object CheckpointStore {

  // One per file system, user and CheckpointFileManager, for the life of the JVM.
  private val stores = new java.util.concurrent.ConcurrentHashMap[String, CheckpointStore]()

  /**
   * The store of the file system `path` is on, for the current user. The configuration is read when
   * the store is made: the first one of a file system wins for the life of the JVM (as in Hadoop's own
   * cache of file systems). The key is worked out without a file system, which Hadoop would make anew
   * on every call where its cache is off (`fs.<scheme>.impl.disable.cache`).
   */
  def of(path: Path, conf: Configuration): CheckpointStore = {
    val uri    = if (path.toUri.getScheme != null) path.toUri else FileSystem.getDefaultUri(conf)
    val scheme = Option(uri.getScheme).getOrElse("file")
    val user   = UserGroupInformation.getCurrentUser.getUserName
    val key    = s"$scheme://${Option(uri.getAuthority).getOrElse("")} $user ${conf.get(SparkCheckpointFileManager.ClassConf, "")}"
    stores.computeIfAbsent(key, _ => if (scheme == "file") LocalCheckpointStore else HadoopCheckpointStore(path, conf))
  }

}
