package io.github.kafkashare.it.stream

import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.{Files, Path}
import java.util.Properties
import java.util.concurrent.TimeUnit

import scala.concurrent.duration._
import scala.jdk.CollectionConverters._

import io.github.kafkashare.spark.KafkaShareDecisions
import io.github.kafkashare.testkit.{KafkaBroker, KafkaTestOps, ProjectPaths}
import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.functions.{col, lit, when}
import org.apache.spark.sql.streaming.Trigger

/**
 * A checkpoint written by this release, kept as a test fixture (tests/integration/src/test/resources/checkpoints/,
 * README.md there says why), and the broker data it names: a checkpoint holds a cluster id and topic ids, so a
 * fresh broker would refuse it (CLUSTER_CHANGED). Three queries, each on its own topic and group: checkpoint-dedup,
 * two-phase-commit and explicit mode. Each committed a few batches and was stopped inside the next one: its
 * offset log and acquisition log (and decisions, explicit mode) written, its commit not.
 *
 * Rebuild it with `build/sbt "integration/Test/runMain io.github.kafkashare.it.stream.CheckpointFixture"`
 * (docs/internals/testing.md); UpgradeContractSuite resumes it.
 */
object CheckpointFixture {

  /** One query of the fixture: its checkpoint is `checkpoints/<name>`, what its sink held `sink/<name>.tsv`. */
  final case class FixtureQuery(name: String, strategy: String, explicit: Boolean) {
    val topic = s"fixture-$name"
    val group = s"fixture-$name-group"

    def options(bootstrap: String): Map[String, String] = Map(
      "kafka.bootstrap.servers"           -> bootstrap,
      "kafka.share.group.id"              -> group,
      "subscribe"                         -> topic,
      "startingOffsets"                   -> "earliest",
      "kafka.share.exactly.once.strategy" -> strategy,
      "kafka.share.parallelism"           -> "2",
      "maxRecordsPerTrigger"              -> "100"
    ) ++ (if (explicit) Map("kafka.share.acknowledgment.mode" -> "explicit") else Map.empty)

    def hook: BatchHook = if (explicit) new ExplicitDecisions(group) else BatchHook.none
  }

  val Queries: Seq[FixtureQuery] = Seq(
    FixtureQuery("dedup", "checkpoint-dedup", explicit = false),
    FixtureQuery("two-phase", "two-phase-commit", explicit = false),
    FixtureQuery("explicit", "checkpoint-dedup", explicit = true)
  )

  /** Records produced to each topic before the stop. */
  val Produced = 400

  private def folder = ProjectPaths.root.resolve("tests/integration/src/test/resources/checkpoints")

  /** The fixture of `release`, under the project root. */
  def archive(release: String): Path = folder.resolve(s"$release/fixture.tar.gz")

  /** The releases whose fixture is kept, oldest first. */
  def releases: Seq[String] =
    Files.list(folder).iterator.asScala.filter(d => Files.exists(d.resolve("fixture.tar.gz"))).map(_.getFileName.toString).toSeq
      .sortBy(_.split('.').map(_.toInt).toSeq)(Ordering.Implicits.seqOrdering[Seq, Int])

  /** The release that wrote the fixture (versions.properties' project.version when it was generated). */
  val Release = "0.1.0"

  /** The fixture of `release`, unpacked into `dir`: `broker/` (server.properties, data/), `checkpoints/`, `sink/`, `fixture.properties`. */
  def unpack(release: String, dir: Path): Properties = {
    tar(dir, "-xzf", archive(release).toString)
    val props = new Properties
    val in    = Files.newInputStream(dir.resolve("fixture.properties"))
    try props.load(in)
    finally in.close()
    props
  }

  /** What the query's sink held when the fixture was written: batch id to rows. */
  def sinkOf(dir: Path, query: FixtureQuery): Map[Long, Vector[LandedRow]] =
    Files.readAllLines(dir.resolve(s"sink/${query.name}.tsv"), UTF_8).asScala.filter(_.nonEmpty).map { line =>
      line.split('\t') match {
        case Array(batch, key, topic, partition, offset, count, task) =>
          batch.toLong -> LandedRow(key, topic, partition.toInt, offset.toLong, count.toInt, task.toInt)
        case _ => throw new IllegalArgumentException(s"a sink line is batch, key, topic, partition, offset, count, task: '$line'")
      }
    }.groupBy(_._1).map { case (batch, rows) => batch -> rows.map(_._2).toVector }

  def main(args: Array[String]): Unit = {
    val version = SharedBrokers.versions.last
    val work    = Files.createTempDirectory("kafka-share-fixture-")
    val broker  = KafkaBroker.start(version, work.resolve("broker"))
    val kafka   = new KafkaTestOps(broker.bootstrapServers)
    val stopped = Queries.map { q =>
      kafka.createTopic(q.topic, 2)
      kafka.setGroupConfig(q.group, Map("share.record.lock.duration.ms" -> "15000", "share.heartbeat.interval.ms" -> "1000"))
      kafka.produce(q.topic, Produced)
      val checkpoint = work.resolve(s"checkpoints/${q.name}")
      val query      = new ShareQuery(SharedSpark.session, q.options(broker.bootstrapServers), checkpoint, q.hook)
      query.start(Trigger.ProcessingTime(200))
      awaitUntil(120.seconds, s"${q.name}: two committed batches with records") {
        query.query.exception.foreach(e => throw e)
        query.sink.batchSizes.size >= 2
      }
      val hold = new HoldInsideBatch(query.sink.hook)
      query.sink.hook = hold
      awaitUntil(120.seconds, s"${q.name}: a batch held inside foreachBatch")(hold.holding.isDefined)
      query.query.stop()
      val middle = hold.holding.get
      require(!Files.exists(checkpoint.resolve(s"commits/$middle")) && Files.exists(checkpoint.resolve(s"offsets/$middle")))
      val sink = query.sink.written.toSeq.sortBy(_._1).flatMap { case (batch, rows) =>
        rows.map(r => s"$batch\t${r.key}\t${r.topic}\t${r.partition}\t${r.offset}\t${r.deliveryCount}\t${r.task}")
      }
      Files.createDirectories(work.resolve("sink"))
      Files.write(work.resolve(s"sink/${q.name}.tsv"), (sink.mkString("\n") + "\n").getBytes(UTF_8))
      println(s"${q.name}: ${query.sink.rows.size} rows in batches ${query.sink.batchSizes.mkString(",")}, stopped inside batch $middle")
      q.name -> middle
    }
    broker.stop() // a clean shutdown: its logs' indexes trimmed, the share groups' state written
    SharedSpark.session.stop()
    Files.deleteIfExists(work.resolve("broker/broker.log"))
    val props = new Properties
    props.setProperty("release", Release)
    props.setProperty("broker.version", version)
    props.setProperty("produced", Produced.toString)
    props.setProperty("queries", Queries.map(_.name).mkString(","))
    stopped.foreach { case (name, batch) => props.setProperty(s"$name.middle.batch", batch.toString) }
    val out = Files.newOutputStream(work.resolve("fixture.properties"))
    try props.store(out, s"written by CheckpointFixture (spark-kafka-share $Release, Kafka $version)")
    finally out.close()
    val archive = this.archive(Release)
    Files.createDirectories(archive.getParent)
    tar(work, "-czf", archive.toString, "fixture.properties", "sink", "checkpoints", "broker")
    println(s"wrote $archive (${Files.size(archive)} bytes)")
    TestDirs.deleteRecursively(work)
    sys.exit(0)
  }

  private def tar(dir: Path, args: String*): Unit = {
    val process = new ProcessBuilder((Seq("tar", "-C", dir.toString) ++ args): _*).inheritIO().start()
    require(process.waitFor(120, TimeUnit.SECONDS) && process.exitValue() == 0, s"tar ${args.mkString(" ")} failed")
  }

  private def awaitUntil(within: FiniteDuration, what: String)(condition: => Boolean): Unit = {
    val deadline = within.fromNow
    while (!condition) {
      require(!deadline.isOverdue(), s"not within $within: $what")
      Thread.sleep(200)
    }
  }
}

/**
 * Explicit mode's foreachBatch: ACCEPTs every record by decision, or, with `releaseTenths`, RELEASEs the
 * records whose key is a multiple of 10 at their first delivery (a retry), which the sink then does not keep:
 * they must come again.
 */
final class ExplicitDecisions(group: String, releaseTenths: Boolean = false) extends BatchHook {
  private def released = if (releaseTenths) col("deliveryCount") === 1 && col("key").cast("int") % 10 === 0 else lit(false)
  override def read(rows: DataFrame, batchId: Long): DataFrame = {
    KafkaShareDecisions.acknowledge(
      rows.select(col("topic"), col("partition"), col("offset"), when(released, "release").otherwise("accept").as("decision")),
      batchId,
      group
    )
    rows.filter(!released)
  }
}
