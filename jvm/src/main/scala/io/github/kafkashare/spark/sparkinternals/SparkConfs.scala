package io.github.kafkashare.spark.sparkinternals

import scala.util.Try

import org.apache.hadoop.conf.Configuration
import org.apache.spark.sql.SparkSession

/** Settings of Spark's that the source reads although Spark keeps them internal, and how Spark builds a Hadoop configuration. */
object SparkConfs {

  /** How many batches Spark keeps in its offset and commit logs (an internal SQL setting, 100 by default). */
  val MinBatchesToRetain = "spark.sql.streaming.minBatchesToRetain"

  def minBatchesToRetain(spark: SparkSession): Long =
    Try(spark.conf.get(MinBatchesToRetain).trim.toLong).getOrElse(100L)

  /**
   * The Hadoop configuration for the source's checkpoint logs, as Spark makes it for its own
   * (SessionState.newHadoopConf, internal): the application's, with the session's settings on top (a
   * storage key set with spark.conf.set, the SQL setting that picks the CheckpointFileManager).
   */
  def checkpointConf(spark: SparkSession): Configuration = {
    val conf = new Configuration(spark.sparkContext.hadoopConfiguration)
    spark.conf.getAll.foreach { case (k, v) => if (v != null) conf.set(k, v) }
    conf
  }
}
