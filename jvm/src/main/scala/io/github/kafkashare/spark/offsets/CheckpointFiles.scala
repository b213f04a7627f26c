package io.github.kafkashare.spark.offsets

import java.io.FileNotFoundException

import org.apache.hadoop.fs.{FileContext, Path}

/** The checkpoint logs of this source keep one folder per batch, named by the batch number. */
object BatchFolders {

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
