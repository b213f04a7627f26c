package io.github.kafkashare.spark.sparkinternals

import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.Files
import java.util.concurrent.ConcurrentLinkedQueue

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import org.apache.hadoop.fs.{FileAlreadyExistsException, Path}
import org.apache.spark.SPARK_VERSION
import org.apache.spark.sql.{DataFrame, SparkSession}
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection
import org.apache.spark.sql.streaming.Trigger
import org.apache.spark.sql.types._

/**
 * Tries every touchpoint of this package on the Spark it runs in, and says which hold. The suites run it
 * on each supported Spark line; a user can run it on a Spark (a Databricks runtime, say) before moving
 * queries to it:
 * {{{
 * spark-submit --class io.github.kafkashare.spark.sparkinternals.SparkInternalsCheck spark-kafka-share_2.13-<version>.jar
 * }}}
 * It runs one short query of Spark's `rate` source into foreachBatch, with a checkpoint in a temporary
 * directory, and needs no broker.
 */
object SparkInternalsCheck {

  final case class Outcome(touchpoint: String, held: Boolean, detail: String)

  /** The touchpoints, by the names the suites' tests carry. */
  val Touchpoints: Seq[String] = Seq(
    "batch-id-property",
    "query-sink",
    "query-trigger",
    "checkpoint-layout",
    "checkpoint-file-manager",
    "real-time-mode",
    "task-slots",
    "catalyst-rows"
  )

  /** Spark 4.1 and later have real-time mode. */
  def hasRealTimeMode(version: String): Boolean = version.split('.').take(2).map(_.takeWhile(_.isDigit).toInt) match {
    case Array(major, minor) => major > 4 || major == 4 && minor >= 1
    case _                   => false
  }

  def run(spark: SparkSession): Seq[Outcome] = {
    val work    = Files.createTempDirectory("kafka-share-spark-internals-")
    val batches = runQuery(spark, new Path(work.resolve("query").toUri))
    Seq(
      check("batch-id-property")(batchIdProperty(batches.seen)),
      check("query-sink")(querySink(batches.seen)),
      check("query-trigger")(queryTrigger(batches.seen)),
      check("checkpoint-layout")(checkpointLayout(batches)),
      check("checkpoint-file-manager")(checkpointFileManager(spark, new Path(work.resolve("manager").toUri))),
      check("real-time-mode")(realTimeMode()),
      check("task-slots")(taskSlots(spark)),
      check("catalyst-rows")(catalystRows())
    )
  }

  def main(args: Array[String]): Unit = {
    val spark = SparkSession.builder().appName("kafka-share: Spark internals check").getOrCreate()
    val outcomes =
      try run(spark)
      finally spark.stop()
    println(s"kafka-share: Spark $SPARK_VERSION")
    outcomes.foreach(o => println(f"${o.touchpoint}%-24s ${if (o.held) "holds" else "BROKEN"}%-6s ${o.detail}"))
    if (outcomes.exists(!_.held)) sys.exit(1)
  }

  /** What one foreachBatch call saw on the query's thread. */
  private final case class Seen(batch: Long, property: Option[Long], sink: Option[String], trigger: Option[String])
  private final case class Batches(root: Path, seen: Seq[Seen])

  // Two batches of Spark's rate source (it keeps its own log in its source directory) into foreachBatch.
  private def runQuery(spark: SparkSession, root: Path): Batches = {
    val seen = new ConcurrentLinkedQueue[Seen]()
    val record: (DataFrame, Long) => Unit = (df, batch) => {
      val session = df.sparkSession
      seen.add(Seen(batch, SparkBatchId.onThisThread(), QuerySink.ofCurrentQuery(session), QuerySink.triggerOfCurrentQuery(session)))
    }
    val query = spark.readStream.format("rate").option("rowsPerSecond", "5").load()
      .writeStream.option("checkpointLocation", root.toString).trigger(Trigger.ProcessingTime(200L))
      .foreachBatch(record).start()
    // Spark reports a batch's progress after it wrote the batch's commit: two reported batches, both seen.
    def committed = seen.asScala.map(_.batch).toSet.intersect(query.recentProgress.map(_.batchId).toSet)
    try {
      val deadline = System.nanoTime + 60L * 1000 * 1000 * 1000
      while (committed.size < 2 && query.isActive && System.nanoTime < deadline) Thread.sleep(50)
      query.exception.foreach(e => throw e)
      if (committed.size < 2) throw new IllegalStateException(s"the check's query committed ${committed.size} batch(es) in 60 s, not 2")
    } finally query.stop()
    val done = committed
    Batches(root, seen.asScala.toSeq.filter(s => done(s.batch)))
  }

  private def check(touchpoint: String)(body: => String): Outcome =
    try Outcome(touchpoint, held = true, body)
    catch {
      // A class or method that moved is a LinkageError (NoSuchMethodError, NoClassDefFoundError), which NonFatal lets by.
      case e @ (NonFatal(_) | _: LinkageError) => Outcome(touchpoint, held = false, s"${e.getClass.getSimpleName}: ${e.getMessage}")
    }

  private def expect(condition: Boolean, what: => String): Unit = if (!condition) throw new IllegalStateException(what)

  private def batchIdProperty(seen: Seq[Seen]): String = {
    val wrong = seen.filterNot(s => s.property.contains(s.batch))
    expect(wrong.isEmpty, s"${SparkBatchId.Property} on the query's thread: ${wrong.map(s => s"batch ${s.batch} saw ${s.property}")}")
    s"${SparkBatchId.Property} held the batch id in batches ${seen.map(_.batch).mkString(", ")}"
  }

  private def querySink(seen: Seq[Seen]): String = {
    val sinks = seen.map(_.sink).distinct
    expect(sinks == Seq(Some("ForeachBatchSink")), s"the query's sink read as ${sinks.mkString(", ")}, not ForeachBatchSink")
    "a foreachBatch query's sink reads as ForeachBatchSink"
  }

  private def queryTrigger(seen: Seq[Seen]): String = {
    val triggers = seen.map(_.trigger).distinct
    expect(triggers == Seq(Some("ProcessingTimeTrigger")), s"the query's trigger read as ${triggers.mkString(", ")}")
    if (hasRealTimeMode(SPARK_VERSION)) {
      val realTime = classOf[Trigger].getMethod("RealTime", classOf[String]).invoke(null, "5 seconds").getClass.getSimpleName
      expect(realTime == RealTimeMode.TriggerClass, s"Trigger.RealTime is a $realTime, not a ${RealTimeMode.TriggerClass}")
      s"ProcessingTimeTrigger read from the query; Trigger.RealTime is a ${RealTimeMode.TriggerClass}"
    } else "ProcessingTimeTrigger read from the query"
  }

  private def checkpointLayout(batches: Batches): String = {
    val layout = CheckpointLayout(CheckpointLayout.sourceDir(batches.root, 0).toString)
    val fs     = batches.root.getFileSystem(new org.apache.hadoop.conf.Configuration())
    def names(dir: Path): Set[Long] =
      if (!fs.exists(dir)) Set.empty else fs.listStatus(dir).map(_.getPath.getName).flatMap(_.toLongOption).toSet
    val ran = batches.seen.map(_.batch).toSet
    expect(fs.exists(new Path(layout.queryRoot, "sources/0")), s"no ${layout.queryRoot}/sources/0: the rate source's log is elsewhere")
    expect(ran.subsetOf(names(layout.offsets)), s"the offset log ${layout.offsets} holds ${names(layout.offsets)}, not batches $ran")
    expect(ran.subsetOf(names(layout.commits)), s"the commit log ${layout.commits} holds ${names(layout.commits)}, not batches $ran")
    "sources/0, offsets/<batch> and commits/<batch> under the checkpoint"
  }

  private def checkpointFileManager(spark: SparkSession, dir: Path): String = {
    val manager = SparkCheckpointFileManager.create(dir, spark.sparkContext.hadoopConfiguration)
    manager.mkdirs(dir)
    val file = new Path(dir, "0")
    val out  = manager.createAtomic(file, overwrite = false)
    out.write("first".getBytes(UTF_8))
    out.close()
    val second = manager.createAtomic(file, overwrite = false)
    second.write("second".getBytes(UTF_8))
    val refused =
      try { second.close(); false }
      catch { case _: FileAlreadyExistsException => true }
    val cancelled = manager.createAtomic(new Path(dir, "1"), overwrite = false)
    cancelled.write("cancelled".getBytes(UTF_8))
    manager.cancel(cancelled)
    val in = manager.open(file)
    val read =
      try new String(in.readAllBytes(), UTF_8)
      finally in.close()
    val listed = manager.list(dir).map(_.getPath.getName).filterNot(_.startsWith(".")).toSet
    expect(read == "first", s"read back '$read', not 'first'")
    expect(refused, "a second atomic create of one file was not refused")
    expect(listed == Set("0"), s"listed $listed, not the one file written (a cancelled write must leave none)")
    manager.delete(file)
    expect(!manager.exists(file), "the file is there after delete")
    s"${manager.name}: create, refuse a second create, cancel, open, list, delete"
  }

  private def realTimeMode(): String = {
    val expected = hasRealTimeMode(SPARK_VERSION)
    val loaded   = RealTimeMode.streamConstructor
    expect(
      loaded.isDefined == expected,
      s"the real-time stream ${if (loaded.isDefined) "loaded" else "did not load"} on Spark $SPARK_VERSION"
    )
    loaded.fold(s"absent on Spark $SPARK_VERSION, as expected: micro-batch only") { constructor =>
      val interface = Class.forName(RealTimeMode.Interface)
      expect(interface.isAssignableFrom(constructor.getDeclaringClass), s"${RealTimeMode.Stream} is no ${RealTimeMode.Interface}")
      s"${constructor.getDeclaringClass.getSimpleName} loaded and implements ${interface.getSimpleName}"
    }
  }

  private def taskSlots(spark: SparkSession): String = {
    val sc    = spark.sparkContext
    val slots = TaskSlots.of(spark)
    if (sc.master.startsWith("local") && !sc.getConf.contains("spark.default.parallelism")) {
      val expected = sc.defaultParallelism / math.max(1, sc.getConf.getInt("spark.task.cpus", 1))
      expect(slots.contains(expected), s"master ${sc.master}: $slots task slots, where Spark runs $expected tasks at once")
      s"master ${sc.master}: $expected"
    } else {
      expect(slots.forall(_ > 0), s"master ${sc.master}: $slots task slots")
      s"master ${sc.master}: ${slots.fold("not known before an executor registers")(_.toString)}"
    }
  }

  // A row shaped like the source's (binary, string, headers as an array of structs), through the
  // projection Spark applies to a scan's rows.
  private def catalystRows(): String = {
    val header = CatalystRows.row(Array[Any](CatalystRows.string("h"), "v".getBytes(UTF_8)))
    val row    = CatalystRows.row(Array[Any]("k".getBytes(UTF_8), CatalystRows.string("topic"), CatalystRows.array(Array[Any](header))))
    val schema = StructType(Seq(
      StructField("key", BinaryType),
      StructField("topic", StringType),
      StructField("headers", ArrayType(StructType(Seq(StructField("key", StringType), StructField("value", BinaryType)))))
    ))
    val unsafe = UnsafeProjection.create(schema).apply(row)
    val topic  = unsafe.getUTF8String(1).toString
    val key    = unsafe.getArray(2).getStruct(0, 2).getUTF8String(0).toString
    expect(topic == "topic" && key == "h" && new String(unsafe.getBinary(0), UTF_8) == "k", s"read back $topic, $key")
    "built and projected to Spark's UnsafeRow"
  }
}
