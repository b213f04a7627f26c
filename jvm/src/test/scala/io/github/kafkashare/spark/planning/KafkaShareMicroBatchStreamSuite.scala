package io.github.kafkashare.spark.planning

import java.nio.file.Files

import io.github.kafkashare.spark.errors.ShareSourceException
import io.github.kafkashare.spark.metrics.QueryTotals
import io.github.kafkashare.spark.offsets._
import io.github.kafkashare.spark.options.ShareSourceOptions
import io.github.kafkashare.spark.reader.KafkaShareInputPartition
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.connector.read.streaming.ReadLimit
import org.scalatest.BeforeAndAfterAll
import org.scalatest.funsuite.AnyFunSuite

/**
 * The driver's planning loop against a fake cluster ([[ClusterView]]): when a trigger plans a batch,
 * what its offset pins, which offsets it refuses. The checkpoint logs are real files in a temporary
 * folder; the read tasks' pins are written by hand, as executors would.
 */
class KafkaShareMicroBatchStreamSuite extends AnyFunSuite with BeforeAndAfterAll {

  private lazy val spark =
    SparkSession.builder().master("local[1]").appName("stream-planning").config("spark.ui.enabled", "false").getOrCreate()

  override def afterAll(): Unit = spark.stop()

  private final class FakeCluster extends ClusterView {
    @volatile var ends: Map[(String, Int), Long]       = Map(("orders", 0) -> 100L)
    @volatile var groupStart: Map[(String, Int), Long] = Map(("orders", 0) -> 0L)
    @volatile var ids: Map[String, String]             = Map("orders" -> "id-1")
    override def resolveTopics(): Seq[String]          = Seq("orders")
    override def topicsNow(topics: Seq[String]): TopicsNow =
      TopicsNow(ends.filter { case ((t, _), _) => topics.contains(t) }, ids.filter { case (t, _) => topics.contains(t) })
    override def clusterId(): String = "cluster-1"
    override def groupOffsets(): Map[(String, Int), GroupPartitionOffset] =
      groupStart.map { case (tp, o) => tp -> GroupPartitionOffset(o, None) }
    override def deliveryCountLimit(): Option[Int] = Some(5)
    override def close(): Unit                     = ()
  }

  private final case class Fixture(stream: KafkaShareMicroBatchStream, cluster: FakeCluster, log: AcquisitionLog, checkpoint: String)

  /** A stream of a new query, or of the query whose source checkpoint is `restartOf` (a restart). */
  private def fixture(extra: Map[String, String] = Map.empty, restartOf: Option[(String, FakeCluster)] = None): Fixture = {
    val spark_     = spark
    val checkpoint = restartOf.map(_._1).getOrElse(Files.createTempDirectory("stream-planning").resolve("sources").resolve("0").toString)
    val options = ShareSourceOptions.parse(
      Map("kafka.bootstrap.servers" -> "localhost:9", "kafka.share.group.id" -> "orders-group", "subscribe" -> "orders") ++ extra
    )
    val features   = BrokerFeatures.of(27, 27, shareVersion = 1, Some(Map.empty))
    val hadoopConf = StreamStart.hadoopConfOf(spark_)
    val cluster    = restartOf.map(_._2).getOrElse(new FakeCluster)
    val stream = new KafkaShareMicroBatchStream(
      options,
      checkpoint,
      cluster,
      StreamSettings(parallelism = 2, lockDurationMs = 30000L, initialDeliveryLimit = Some(5), features, Map.empty),
      hadoopConf,
      QueryTotals(spark_.sparkContext),
      explicit = None
    )
    Fixture(stream, cluster, new AcquisitionLog(checkpoint, hadoopConf), checkpoint)
  }

  private def next(f: Fixture, start: ShareSourceOffset): ShareSourceOffset =
    ShareSourceOffset.of(f.stream.latestOffset(start, ReadLimit.allAvailable()))

  /** The batch's two read tasks pinned `offsets` of orders-0 (task 0) and nothing (task 1). */
  private def ran(f: Fixture, batch: ShareSourceOffset, offsets: Seq[Long]): Unit = {
    f.log.writeIfAbsent(batch.batch, 0, AcquisitionEntry.of(offsets.map(o => ("orders", 0, o, 1))))
    f.log.writeIfAbsent(batch.batch, 1, AcquisitionEntry.empty)
  }

  private def condition(e: Throwable): String = e match {
    case s: ShareSourceException => s.getCondition
    case other                   => fail(s"not a catalogued error: $other")
  }

  test("a first batch, more while batches get records, none while the stream is idle, one when the ends move") {
    val f     = fixture()
    val first = next(f, ShareSourceOffset.initial)
    assert(first.batch == 0 && first.tasks == 2 && first.group == "orders-group" && first.cluster == "cluster-1")
    assert(first.topicIds == Map("orders" -> "id-1"))
    ran(f, first, 10L to 19L)
    val second = next(f, first)
    assert(second.batch == 1, "the last batch got records: there may be more")
    assert(second.pinned.byPartition(("orders", 0)).contains(10) && second.pinned.byPartition(("orders", 0)).contains(19))
    ran(f, second, Nil)
    assert(next(f, second) == second, "nothing came and nothing moved: no batch")
    assert(next(f, second) == second)
    f.cluster.ends = Map(("orders", 0) -> 120L)
    assert(next(f, second).batch == 2, "new records")
  }

  test("pins below the group's start offset are dropped: the group acknowledged those records for good") {
    val f     = fixture()
    val first = next(f, ShareSourceOffset.initial)
    ran(f, first, 10L to 19L)
    f.cluster.groupStart = Map(("orders", 0) -> 20L)
    val second = next(f, first)
    assert(second.batch == 1 && second.pinned.byPartition.get(("orders", 0)).forall(_.isEmpty))
  }

  test("the read tasks carry the pinned set, the topics and each task's share of maxRecordsPerTrigger") {
    val f     = fixture(Map("maxRecordsPerTrigger" -> "101"))
    val first = next(f, ShareSourceOffset.initial)
    ran(f, first, Seq(5L))
    val second = next(f, first)
    val tasks  = f.stream.planInputPartitions(first, second).map(_.asInstanceOf[KafkaShareInputPartition])
    assert(tasks.map(_.task).toSeq == Seq(0, 1))
    assert(tasks.forall(t => t.batch == second.batch && t.pinned == second.pinned && t.topics == Seq("orders")))
    assert(tasks.forall(_.maxRecords == 51), "101 over 2 tasks, rounded up")
    assert(tasks.forall(_.deliveryLimit == 5))
  }

  test("parallelism auto: a first batch with a backlog gets the most read tasks, one without it the fewest; the progress says why") {
    val busy  = fixture(Map("kafka.share.parallelism" -> "auto"))
    val first = next(busy, ShareSourceOffset.initial)
    assert(first.tasks == 2, "the most: the stream's parallelism")
    val metrics = busy.stream.metrics(java.util.Optional.of(first))
    assert(metrics.get("parallelism") == "2")
    assert(metrics.get("parallelismReason").contains("a backlog of 100 records"), metrics.get("parallelismReason"))
    val quiet = fixture(Map("kafka.share.parallelism" -> "auto"))
    quiet.cluster.groupStart = Map(("orders", 0) -> 100L)
    assert(next(quiet, ShareSourceOffset.initial).tasks == 1, "the fewest: nothing waits")
    assert(fixture().stream.metrics(java.util.Optional.empty()).get("parallelismReason") == null, "a fixed parallelism has no reason")
  }

  test("parallelism auto: a batch run again after a restart keeps the read tasks its offset recorded, whatever auto would choose now") {
    val auto    = Map("kafka.share.parallelism" -> "auto")
    val f       = fixture(auto)
    val planned = next(f, ShareSourceOffset.initial)
    assert(planned.tasks == 2)
    f.cluster.groupStart = Map(("orders", 0) -> 100L) // no backlog now: auto would choose 1
    val restarted = fixture(auto, restartOf = Some((f.checkpoint, f.cluster)))
    assert(restarted.stream.planInputPartitions(ShareSourceOffset.initial, planned).length == 2)
  }

  test("a read task is small: the checkpoint's Hadoop configuration goes to each executor once, not in every task") {
    spark.sparkContext.hadoopConfiguration.set("kafkashare.test.marker", "shipped")
    val f     = fixture()
    val first = next(f, ShareSourceOffset.initial)
    val task  = f.stream.planInputPartitions(ShareSourceOffset.initial, first).head
    val bytes = new java.io.ByteArrayOutputStream
    val out   = new java.io.ObjectOutputStream(bytes)
    out.writeObject(task)
    out.close()
    // By value, the configuration alone is over 100 KB; Spark serializes each task at every batch's start.
    assert(bytes.size < 20000, s"a read task is ${bytes.size} bytes")
    val copy = new java.io.ObjectInputStream(new java.io.ByteArrayInputStream(bytes.toByteArray)).readObject()
    assert(copy.asInstanceOf[KafkaShareInputPartition].query.log.read(first.batch, 0).isEmpty, "the copy cannot read the log")
    val shipped = task.asInstanceOf[KafkaShareInputPartition].query.hadoopConf.shared
    assert(shipped.exists(_.value.value.get("kafkashare.test.marker") == "shipped"), "not the session's configuration")
  }

  test("offsets of another group or cluster are refused, at planning and when a batch runs again") {
    val f     = fixture()
    val first = next(f, ShareSourceOffset.initial)
    ran(f, first, Seq(1L))
    val otherGroup = intercept[Exception](next(f, first.copy(group = "someone-else")))
    assert(condition(otherGroup) == "KAFKA_SHARE_CHECKPOINT_MISMATCH.GROUP_CHANGED")
    // A batch planned before a restart (not the offset this stream returned last) is checked again.
    f.stream.planInputPartitions(ShareSourceOffset.initial, first) // the one it planned: runs
    val otherCluster = intercept[Exception](f.stream.planInputPartitions(first, first.copy(cluster = "cluster-0")))
    assert(condition(otherCluster) == "KAFKA_SHARE_CHECKPOINT_MISMATCH.CLUSTER_CHANGED")
  }

  test("a topic created again under its name: a batch planned before refuses to replay, later offsets forget the old pins") {
    val f     = fixture()
    val first = next(f, ShareSourceOffset.initial)
    ran(f, first, 10L to 19L)
    f.cluster.ids = Map("orders" -> "id-2")
    val restarted = fixture(restartOf = Some((f.checkpoint, f.cluster)))
    val replay    = intercept[Exception](restarted.stream.planInputPartitions(ShareSourceOffset.initial, first))
    assert(condition(replay) == "KAFKA_SHARE_DATA_LOSS.TOPIC_RECREATED")
    val after = next(restarted, first)
    assert(after != first, "a batch was planned, not skipped")
    assert(after.pinned.byPartition.get(("orders", 0)).forall(_.isEmpty), "the old pins name none of the new topic's records")
    assert(after.topicIds == Map("orders" -> "id-2"))
  }

  test("after a real-time run of a batch that did not commit, the micro-batch taking its id replays all its log tasks") {
    val f = fixture()
    // A real-time run of batch 0 with parallelism 3 (log tasks 0 to 2) stopped before it committed.
    (0 until 3).foreach(task => f.log.writeIfAbsent(0, task, AcquisitionEntry.of(Seq(("orders", 0, task.toLong, 1)))))
    val first = next(f, ShareSourceOffset.initial)
    assert(first.batch == 0 && first.tasks == 3, "a task for each log task of the batch, past the parallelism of 2")
    assert(f.stream.planInputPartitions(ShareSourceOffset.initial, first).map(_.asInstanceOf[KafkaShareInputPartition].task).toSeq == Seq(
      0,
      1,
      2
    ))
    (0 until 3).foreach(task => f.log.sealTask(0, task))
    val second = next(f, first)
    assert(second.tasks == 2, "later batches have the parallelism")
    assert(second.pinned.byPartition(("orders", 0)).contains(2), "the log task past the parallelism is pinned after the batch")
  }

  test("a micro-batch after a real-time batch emits first what that batch pinned and did not emit") {
    val f    = fixture()
    val left = Seq(AcquiredRun("orders", 0, 40, 44, 1), AcquiredRun("orders", 0, 50, 50, 2), AcquiredRun("orders", 0, 60, 61, 1))
    val realEnd =
      ShareSourceOffset(3, 2, TopicPartitionRanges.empty, "cluster-1", "orders-group", Map("orders" -> "id-1"), unemitted = left)
    val after = next(f, realEnd)
    val tasks = f.stream.planInputPartitions(realEnd, after).map(_.asInstanceOf[KafkaShareInputPartition])
    assert(tasks.flatMap(_.handedOver.carried).sortBy(_.first).toSeq == left, "every unemitted run, once, spread over the tasks")
    assert(tasks.forall(_.handedOver.earlierRunTasks.isEmpty))
  }
}
