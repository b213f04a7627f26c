package io.github.kafkashare.spark.sparkinternals

import java.lang.reflect.{InvocationTargetException, Method}

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{FSDataInputStream, FSDataOutputStream, FileStatus, Path}

/**
 * Spark's CheckpointFileManager, the one its own offset and commit logs use: the class named by
 * `spark.sql.streaming.checkpointFileManagerClass` (how vendors make checkpoints on their stores
 * safe), else Hadoop's FileContext where the file system has one, else its FileSystem.
 *
 * Reached by reflection because Spark 4.1 moved it (from `o.a.s.sql.execution.streaming` to its
 * `checkpointing` subpackage) and the jar runs on 4.0 and later alike. Its methods take and return
 * Hadoop types only.
 */
final class SparkCheckpointFileManager private (manager: AnyRef, api: Class[_]) {
  import SparkCheckpointFileManager.call

  private val createAtomicMethod = api.getMethod("createAtomic", classOf[Path], java.lang.Boolean.TYPE)
  private val openMethod         = api.getMethod("open", classOf[Path])
  private val listMethod         = api.getMethod("list", classOf[Path])
  private val existsMethod       = api.getMethod("exists", classOf[Path])
  private val deleteMethod       = api.getMethod("delete", classOf[Path])
  private val mkdirsMethod       = api.getMethod("mkdirs", classOf[Path])
  // On the public stream type: a manager's own stream class may be private.
  private val cancelMethod =
    Class.forName(api.getName + "$CancellableFSDataOutputStream", true, api.getClassLoader).getMethod("cancel")

  /** The manager's class, for the log. */
  def name: String = manager.getClass.getName

  /**
   * A stream whose close puts the file at `path` (without `overwrite`, failing with Hadoop's
   * FileAlreadyExistsException when a file is there), and whose `cancel` drops it.
   */
  def createAtomic(path: Path, overwrite: Boolean): FSDataOutputStream =
    call(createAtomicMethod, manager, path, Boolean.box(overwrite)).asInstanceOf[FSDataOutputStream]

  def cancel(stream: FSDataOutputStream): Unit = call(cancelMethod, stream)

  def open(path: Path): FSDataInputStream = call(openMethod, manager, path).asInstanceOf[FSDataInputStream]
  def list(dir: Path): Array[FileStatus]  = call(listMethod, manager, dir).asInstanceOf[Array[FileStatus]]
  def exists(path: Path): Boolean         = call(existsMethod, manager, path).asInstanceOf[java.lang.Boolean]
  def delete(path: Path): Unit            = call(deleteMethod, manager, path) // recursive, and quiet when nothing is there
  def mkdirs(dir: Path): Unit             = call(mkdirsMethod, manager, dir)
}

object SparkCheckpointFileManager {

  /** The SQL setting by which a user picks the manager; Spark copies SQL settings into Hadoop's. */
  val ClassConf = "spark.sql.streaming.checkpointFileManagerClass"

  private val ClassNames = Seq(
    "org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager", // Spark 4.1 and later
    "org.apache.spark.sql.execution.streaming.CheckpointFileManager"                // Spark 4.0
  )

  /** Spark's `CheckpointFileManager.create(path, conf)`. */
  def create(path: Path, conf: Configuration): SparkCheckpointFileManager = {
    val api = ClassNames.iterator
      .flatMap(n => scala.util.Try(Class.forName(n, true, classOf[SparkCheckpointFileManager].getClassLoader)).toOption)
      .nextOption()
      .getOrElse(throw new IllegalStateException(s"none of ${ClassNames.mkString(", ")} is on the class path: is this Spark 4?"))
    val companion = Class.forName(api.getName + "$", true, api.getClassLoader)
    val module    = companion.getField("MODULE$").get(null)
    val manager   = call(companion.getMethod("create", classOf[Path], classOf[Configuration]), module, path, conf)
    new SparkCheckpointFileManager(manager, api)
  }

  /** Calls by reflection, throwing what the method threw (an IOException stays one). */
  private def call(method: Method, target: AnyRef, args: AnyRef*): AnyRef =
    try method.invoke(target, args: _*)
    catch { case e: InvocationTargetException if e.getCause != null => throw e.getCause }
}
