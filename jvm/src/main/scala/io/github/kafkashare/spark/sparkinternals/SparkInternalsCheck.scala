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
 * It runs one short query of its own source ([[ProbeSource]], which notes what it sees where the kafka-share
 * source reads Spark's internals) into foreachBatch, with a checkpoint in a temporary directory, and needs
 * no broker.
 */
object SparkInternalsCheck {

  final case class Outcome(touchpoint: String, held: Boolean, detail: String)

  /** The touchpoints, by the names the suites' tests carry. */
  val Touchpoints: Seq[String] = Seq(
    "batch-id-property",
    "stream-thread",
    "query-sink",
    "query-trigger",
    "checkpoint-layout",
    "progress-description",
    "min-batches-to-retain",
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

  /** Each touchpoint's outcome on `spark`; one check at a time per JVM (the probe source notes to one queue). */
  def run(spark: SparkSession): Seq[Outcome] = synchronized {
    val work = Files.createTempDirectory("kafka-share-spark-internals-")
    try {
      val query =
        try Right(runQuery(spark, new Path(work.resolve("query").toUri)))
        catch { case e @ (NonFatal(_) | _: LinkageError) => Left(e) }
      // A touchpoint the query shows is broken when the query failed: with the query's error.
      def ofQuery(check: Batches => String): () => String = () => check(query.fold(e => throw e, identity))
      Seq(
        check("batch-id-property")(ofQuery(batchIdProperty)),
        check("stream-thread")(ofQuery(streamThread)),
        check("query-sink")(ofQuery(querySink)),
        check("query-trigger")(ofQuery(queryTrigger)),
        check("checkpoint-layout")(ofQuery(checkpointLayout)),
        check("progress-description")(ofQuery(progressDescription)),
        check("min-batches-to-retain")(() => minBatchesToRetain(spark)),
        check("checkpoint-file-manager")(() => checkpointFileManager(spark, new Path(work.resolve("manager").toUri))),
        check("real-time-mode")(() => realTimeMode()),
        check("task-slots")(() => taskSlots(spark)),
        check("catalyst-rows")(() => catalystRows())
      )
    } finally deleteTree(work)
  }

  /**
   * Prints each touchpoint's outcome; fails (a non-zero exit from spark-submit) when one is broken. Stops
   * only a session it started, and never exits the JVM itself (a Databricks job's JVM is not its own).
   */
  def main(args: Array[String]): Unit = {
    val existing = SparkSession.getActiveSession.orElse(SparkSession.getDefaultSession)
    val spark    = SparkSession.builder().appName("kafka-share: Spark internals check").getOrCreate()
    val outcomes =
      try run(spark)
      finally if (existing.isEmpty) spark.stop()
    println(report(outcomes))
    val broken = outcomes.filterNot(_.held).map(_.touchpoint)
    if (broken.nonEmpty)
      throw new IllegalStateException(s"kafka-share: Spark internals broken on Spark $SPARK_VERSION: ${broken.mkString(", ")}")
  }

  /** The outcomes as main prints them: the Spark line, then one line per touchpoint. */
  def report(outcomes: Seq[Outcome]): String =
    (s"kafka-share: Spark $SPARK_VERSION" +:
      outcomes.map(o => f"${o.touchpoint}%-24s ${if (o.held) "holds" else "BROKEN"}%-6s ${o.detail}")).mkString("\n")

  /** What the query showed: the probe source's notes, each foreachBatch call's, the batches it committed. */
  private final case class Batches(
      root: Path,
      probe: Seq[ProbeSource.Seen],
      inBatches: Seq[ProbeSource.Seen],
      ends: Map[Long, Long], // batch id -> the probe's end offset it read
      committed: Set[Long],
      description: String
  )

  // Batches of the probe source into foreachBatch, until two committed.
  private def runQuery(spark: SparkSession, root: Path): Batches = {
    ProbeSource.seen.clear()
    val inBatches = new ConcurrentLinkedQueue[ProbeSource.Seen]()
    val ends      = new java.util.concurrent.ConcurrentHashMap[Long, Long]()
    val record: (DataFrame, Long) => Unit = (df, batch) => {
      inBatches.add(ProbeSource.note("foreachBatch", batch))
      df.collect().foreach(row => ends.put(batch, row.getLong(0)))
    }
    val query = spark.readStream.format(classOf[ProbeSource].getName).load()
      .writeStream.option("checkpointLocation", root.toString).trigger(Trigger.ProcessingTime(200L))
      .foreachBatch(record).start()
    // Spark reports a batch's progress after it wrote the batch's commit.
    def committed = ends.keySet.asScala.toSet.intersect(query.recentProgress.map(_.batchId).toSet)
    try {
      val deadline = System.nanoTime + 60L * 1000 * 1000 * 1000
      while (committed.size < 2 && query.isActive && System.nanoTime < deadline) Thread.sleep(50)
      query.exception.foreach(e => throw e)
      if (committed.size < 2) throw new IllegalStateException(s"the check's query committed ${committed.size} batch(es) in 60 s, not 2")
    } finally query.stop()
    val done        = committed
    val description = query.recentProgress.find(p => done(p.batchId)).flatMap(_.sources.headOption).fold("")(_.description)
    Batches(root, ProbeSource.seen.asScala.toSeq, inBatches.asScala.toSeq, ends.asScala.toMap, done, description)
  }

  private def check(touchpoint: String)(body: () => String): Outcome =
    try Outcome(touchpoint, held = true, body())
    catch {
      // A class or method that moved is a LinkageError (NoSuchMethodError, NoClassDefFoundError), which NonFatal lets by.
      case e @ (NonFatal(_) | _: LinkageError) =>
        val cause = Option(e.getCause).filter(_ => e.isInstanceOf[java.util.concurrent.ExecutionException]).getOrElse(e)
        Outcome(touchpoint, held = false, s"${cause.getClass.getSimpleName}: ${cause.getMessage}")
    }

  private def expect(condition: Boolean, what: => String): Unit = if (!condition) throw new IllegalStateException(what)

  private def started(b: Batches): ProbeSource.Seen =
    b.probe.find(_.call == "start").getOrElse(throw new IllegalStateException("Spark never built the probe's stream"))

  // Where the source reads the property: in latestOffset, it must name the batch Spark ran last (none before the
  // first: a fresh query); when Spark plans a batch's partitions, and in foreachBatch, that batch.
  private def batchIdProperty(b: Batches): String = {
    val byEnd = b.ends.map { case (batch, end) => end -> batch }
    val wrong = b.committed.toSeq.sorted.flatMap { batch =>
      val end      = b.ends(batch)
      val asked    = b.probe.find(s => s.call == "latestOffset" && s.end == end).map(_.batchIdProperty)
      val planned  = b.probe.filter(s => s.call == "planInputPartitions" && s.end == end).map(_.batchIdProperty).distinct
      val inBatch  = b.inBatches.filter(_.end == batch).map(_.batchIdProperty).distinct
      val previous = if (batch == 0) None else Some(batch - 1)
      Seq(
        Option.when(!asked.contains(previous))(s"latestOffset before batch $batch saw ${asked.flatten}, not $previous"),
        Option.when(planned != Seq(Some(batch)))(s"planning batch $batch saw $planned"),
        Option.when(inBatch != Seq(Some(batch)))(s"foreachBatch of batch $batch saw $inBatch")
      ).flatten
    }
    expect(byEnd.size == b.ends.size, s"two batches read one end: ${b.ends}")
    expect(wrong.isEmpty, s"${SparkBatchId.Property}: ${wrong.mkString("; ")}")
    s"${SparkBatchId.Property}: the last batch's id in latestOffset, the batch's own when it is planned (batches ${b.committed.toSeq.sorted.mkString(", ")})"
  }

  private def streamThread(b: Batches): String = {
    val calls = b.probe.filter(s => s.call == "start" || s.call == "latestOffset")
    val other = calls.filterNot(s => s.thread.startsWith(StreamThread.NamePrefix)).map(s => s"${s.call} on '${s.thread}'")
    expect(calls.nonEmpty && other.isEmpty, s"not on a thread named '${StreamThread.NamePrefix} ...': ${other.distinct.mkString(", ")}")
    s"the source is built and asked for offsets on '${calls.head.thread}'"
  }

  private def querySink(b: Batches): String = {
    val sink = started(b).sink
    expect(sink.contains(QuerySink.ForeachBatch), s"the query's sink read as $sink at the source's start, not ${QuerySink.ForeachBatch}")
    s"a foreachBatch query's sink reads as ${QuerySink.ForeachBatch} when Spark builds the source"
  }

  private def queryTrigger(b: Batches): String = {
    val trigger = started(b).trigger
    expect(trigger.contains("ProcessingTimeTrigger"), s"the query's trigger read as $trigger at the source's start")
    if (hasRealTimeMode(SPARK_VERSION)) {
      // The class of the trigger Spark's API makes; that a real-time query's field holds it is the real-time suites'.
      val realTime = classOf[Trigger].getMethod("RealTime", classOf[String]).invoke(null, "5 seconds").getClass.getSimpleName
      expect(realTime == RealTimeMode.TriggerClass, s"Trigger.RealTime is a $realTime, not a ${RealTimeMode.TriggerClass}")
      s"ProcessingTimeTrigger read when Spark builds the source; Trigger.RealTime is a ${RealTimeMode.TriggerClass}"
    } else "ProcessingTimeTrigger read when Spark builds the source"
  }

  private def checkpointLayout(b: Batches): String = {
    val handed   = new Path(started(b).sourceDir)
    val expected = CheckpointLayout.sourceDir(b.root, 0)
    expect(handed.toUri.getPath == expected.toUri.getPath, s"Spark gave the source $handed, not $expected")
    val layout = CheckpointLayout(handed.toString)
    val fs     = b.root.getFileSystem(new org.apache.hadoop.conf.Configuration())
    def names(dir: Path): Set[Long] =
      if (!fs.exists(dir)) Set.empty else fs.listStatus(dir).map(_.getPath.getName).flatMap(CheckpointLayout.batchOf).toSet
    expect(
      b.committed.subsetOf(names(layout.offsets)),
      s"the offset log ${layout.offsets} holds ${names(layout.offsets)}, not ${b.committed}"
    )
    expect(
      b.committed.subsetOf(names(layout.commits)),
      s"the commit log ${layout.commits} holds ${names(layout.commits)}, not ${b.committed}"
    )
    "the source's directory is sources/0; offsets/<batch> and commits/<batch> beside it"
  }

  private def progressDescription(b: Batches): String = {
    val stream = started(b).description
    expect(b.description == stream, s"the progress describes the source as '${b.description}', not by its stream's toString '$stream'")
    "the progress describes a source by its stream's toString"
  }

  private def minBatchesToRetain(spark: SparkSession): String = {
    val value = spark.conf.get(SparkConfs.MinBatchesToRetain)
    expect(value.trim.toLongOption.exists(_ > 0), s"${SparkConfs.MinBatchesToRetain} is '$value'")
    s"${SparkConfs.MinBatchesToRetain} = $value"
  }

  private def checkpointFileManager(spark: SparkSession, dir: Path): String = {
    val manager = SparkCheckpointFileManager.create(dir, SparkConfs.checkpointConf(spark))
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

  private def deleteTree(dir: java.nio.file.Path): Unit =
    try Files.walk(dir).sorted(java.util.Comparator.reverseOrder()).forEach(p => Files.deleteIfExists(p))
    catch { case NonFatal(_) => () }

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
    val sc = spark.sparkContext
    if (sc.master.startsWith("local") && !sc.getConf.contains("spark.default.parallelism")) {
      // local[n]: Spark's default parallelism is the master's cores; local-cluster: the registered executors' cores.
      val deadline = System.nanoTime + 30L * 1000 * 1000 * 1000
      while (sc.master.startsWith("local-cluster") && TaskSlots.of(spark).exists(sc.defaultParallelism < _) && System.nanoTime < deadline)
        Thread.sleep(100)
      val expected = sc.defaultParallelism / math.max(1, sc.getConf.getInt("spark.task.cpus", 1))
      val slots    = TaskSlots.of(spark)
      expect(slots.contains(expected), s"master ${sc.master}: $slots task slots, where Spark runs $expected tasks at once")
      s"master ${sc.master}: $expected"
    } else {
      // A cluster manager: the slots are counted from the registered executors, which may still be starting.
      val deadline = System.nanoTime + 30L * 1000 * 1000 * 1000
      while (TaskSlots.of(spark).isEmpty && System.nanoTime < deadline) Thread.sleep(200)
      val slots = TaskSlots.of(spark)
      expect(slots.exists(_ > 0), s"master ${sc.master}: no task slot counted in 30 s ($slots)")
      s"master ${sc.master}: ${slots.get}"
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
