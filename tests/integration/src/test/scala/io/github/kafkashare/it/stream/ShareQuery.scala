package io.github.kafkashare.it.stream

import java.nio.file.Path

import scala.collection.mutable.ArrayBuffer

import org.apache.spark.sql.{DataFrame, SparkSession}
import org.apache.spark.sql.streaming.{StreamingQuery, StreamingQueryProgress, Trigger}

/**
 * One kafka-share query of a test: its reader options, checkpoint and sink. The test's actions start,
 * stop and restart it; every run uses the same checkpoint, as a restarted application would.
 */
final class ShareQuery(
    spark: SparkSession,
    initialOptions: Map[String, String],
    val checkpoint: Path,
    hook: BatchHook = BatchHook.none,
    scheme: Option[String] = None // the checkpoint's file system, when not the local one
) {

  val sink                                    = new BatchSink(hook)
  private var current: Option[StreamingQuery] = None
  @volatile private var currentOptions        = initialOptions

  /** The reader options of the next start (a restart on the same checkpoint may change them: UpgradeContractSuite). */
  def options: Map[String, String] = currentOptions

  /** Changes the options of the next start: `set` added or replaced, `drop` removed; the checkpoint and sink stay. */
  def changeOptions(set: Map[String, String], drop: Set[String] = Set.empty): Unit = {
    require(current.forall(!_.isActive), "change the options of a stopped query")
    currentOptions = currentOptions -- drop ++ set
  }
  private val earlierProgress = ArrayBuffer.empty[StreamingQueryProgress]

  def strategy: String = options.getOrElse("kafka.share.exactly.once.strategy", "none")

  /** The strategy of every run so far (changed options may have changed it). */
  def strategiesRun: Seq[String] = strategies.distinct.toSeq
  private val strategies         = ArrayBuffer.empty[String]

  def start(trigger: Trigger): Unit = {
    require(current.forall(!_.isActive), "the query is running already")
    current.foreach(q => earlierProgress ++= q.recentProgress)
    strategies += strategy
    val write: (DataFrame, Long) => Unit = sink.write
    val records                          = spark.readStream.format("kafka-share").options(options).load()
    current = Some(
      records.writeStream
        .foreachBatch(write)
        .option("checkpointLocation", scheme.fold(checkpoint.toString)(s => s"$s://${checkpoint.toUri.getPath}"))
        .trigger(trigger)
        .start()
    )
  }

  def query: StreamingQuery = current.getOrElse(throw new IllegalStateException("the query was never started"))

  /** Stops between batches, not inside one (a batch interrupted after it pinned keeps its records). */
  def stop(): Unit = current.foreach { q =>
    val until = System.nanoTime + 60L * 1000 * 1000 * 1000
    while (q.isActive && q.status.isTriggerActive && System.nanoTime < until) Thread.sleep(20)
    q.stop()
  }

  /** Progress of every batch of every run, in order. */
  def progress: Seq[StreamingQueryProgress] = (earlierProgress ++ current.toSeq.flatMap(_.recentProgress)).toSeq

  /** Progress of the batches that read records. */
  def batchesWithRecords: Seq[StreamingQueryProgress] = progress.filter(_.numInputRows > 0)

  /** The source's metrics in the newest progress. */
  def metrics: Map[String, String] = {
    import scala.jdk.CollectionConverters._
    progress.lastOption.map(_.sources.head.metrics.asScala.toMap).getOrElse(Map.empty)
  }

  /** Batches committed to the checkpoint's commit log. */
  def committedBatches: Int = {
    val commits = checkpoint.resolve("commits").toFile
    Option(commits.listFiles()).map(_.count(_.getName.forall(_.isDigit))).getOrElse(0)
  }

  def describe: String =
    current.map(q => s"active=${q.isActive} status=${q.status} exception=${q.exception.map(_.getMessage)}").getOrElse("not started") +
      s"; sink: ${sink.rows.size} rows, ${sink.distinctKeys} distinct keys, batches ${sink.batchSizes.mkString(",")}"
}
