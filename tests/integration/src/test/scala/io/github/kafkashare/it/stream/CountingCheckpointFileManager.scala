package io.github.kafkashare.it.stream

import java.util.concurrent.ConcurrentLinkedQueue

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.apache.spark.sql.execution.streaming.CheckpointFileManager.CancellableFSDataOutputStream
import org.apache.spark.sql.execution.streaming.FileContextBasedCheckpointFileManager

/**
 * A checkpoint file manager of the user's choice (`spark.sql.streaming.checkpointFileManagerClass`),
 * as vendors ship for their stores: Spark's own, noting every file it writes.
 */
final class CountingCheckpointFileManager(path: Path, conf: Configuration) extends FileContextBasedCheckpointFileManager(path, conf) {
  override def createAtomic(file: Path, overwriteIfPossible: Boolean): CancellableFSDataOutputStream = {
    CountingCheckpointFileManager.written.add(file.toUri.getPath)
    super.createAtomic(file, overwriteIfPossible)
  }
}

object CountingCheckpointFileManager {
  val written = new ConcurrentLinkedQueue[String]()
}
