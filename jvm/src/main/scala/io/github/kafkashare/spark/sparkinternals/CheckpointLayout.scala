package io.github.kafkashare.spark.sparkinternals

import org.apache.hadoop.fs.Path

/**
 * Where Spark keeps a query's logs, from the directory it gives a source: `<root>/sources/<n>` is the
 * source's, `<root>/offsets/<batch>` and `<root>/commits/<batch>` are Spark's own offset and commit logs.
 * Spark documents the checkpoint as a whole, not this layout; the source reads the two logs to know
 * which batch Spark plans and which it committed.
 */
final case class CheckpointLayout(sourceDir: String) {
  val queryRoot: Path = new Path(sourceDir).getParent.getParent
  val offsets: Path   = new Path(queryRoot, "offsets")
  val commits: Path   = new Path(queryRoot, "commits")
}

object CheckpointLayout {

  /** The directory Spark gives source number `index` of the query whose checkpoint is `root`. */
  def sourceDir(root: Path, index: Int): Path = new Path(new Path(root, "sources"), index.toString)

  /** The file of batch `batch` in one of Spark's logs (offsets, commits): named by the batch id. */
  def entry(log: Path, batch: Long): Path = new Path(log, batch.toString)

  /** The batch a file of Spark's logs is of, by its name; None for another file. */
  def batchOf(fileName: String): Option[Long] = fileName.toLongOption
}
