package io.github.kafkashare.it.stream

import scala.concurrent.duration._

import io.github.kafkashare.testkit.{KafkaBroker, KafkaTestOps}
import org.apache.spark.sql.streaming.Trigger

/** A test's topic and group on `broker` (see ShareStreamTest.prepare). */
final case class Prepared(broker: KafkaBroker, topic: String, group: String) {
  val kafka = new KafkaTestOps(broker.bootstrapServers)

  /** A query reading the topic into its own sink, with the given strategy and options. */
  def query(strategy: String, options: (String, String)*): ShareQuery = queryWith(BatchHook.none, strategy, options: _*)

  /** A query of the topics that match `pattern` (subscribePattern), in this test's group. */
  def patternQuery(pattern: String, strategy: String): ShareQuery = {
    val byTopic = query(strategy)
    new ShareQuery(SharedSpark.session, byTopic.options - "subscribe" + ("subscribePattern" -> pattern), byTopic.checkpoint)
  }

  /** The same, with its checkpoint on the file system of `scheme` (the local disk under another name). */
  def queryOn(scheme: String, strategy: String, options: (String, String)*): ShareQuery = {
    val local = query(strategy, options: _*)
    new ShareQuery(SharedSpark.session, local.options, local.checkpoint, scheme = Some(scheme))
  }

  /** The same, with `hook` run inside the query's foreachBatch. */
  def queryWith(hook: BatchHook, strategy: String, options: (String, String)*): ShareQuery =
    new ShareQuery(
      SharedSpark.session,
      Map(
        "kafka.bootstrap.servers"           -> broker.bootstrapServers,
        "kafka.share.group.id"              -> group,
        "subscribe"                         -> topic,
        "startingOffsets"                   -> "earliest",
        "kafka.share.exactly.once.strategy" -> strategy,
        "kafka.share.parallelism"           -> "2"
      ) ++ options,
      TestDirs.create("checkpoint-"),
      hook
    )
}

/** A step of a stream test (ShareStreamTest.testStream), in the style of Spark's StreamTest actions. */
sealed trait StreamAction extends Product

/** Produces `count` records with keys firstKey.. and values of `valueBytes` bytes to the prepared topic. */
final case class AddRecords(prepared: Prepared, count: Int, firstKey: Int = 0, valueBytes: Int = 100) extends StreamAction

final case class StartStream(trigger: Trigger = Trigger.ProcessingTime(200)) extends StreamAction

/** Stops the query between two batches; a later StartStream restarts it from its checkpoint. */
case object StopStream extends StreamAction

/** Trigger.AvailableNow: the query ends by itself within the time. */
final case class AwaitTermination(within: FiniteDuration = 120.seconds) extends StreamAction

/**
 * Every key 0 until `records` (and the keys of `alsoKeys`) landed: lost 0; none twice where the strategy
 * promises exactly once; and the query reported the progress of the sink's last batch.
 */
final case class CheckLanded(records: Int, within: FiniteDuration = 150.seconds, alsoKeys: Range = 0 until 0)
    extends StreamAction

/** Any check on the query, its sink or its progress. */
final case class Assert(what: String)(val check: ShareQuery => Unit) extends StreamAction

/** The query ends with an error whose message holds `containing` (an injected failure). */
final case class ExpectFailure(containing: String, within: FiniteDuration = 150.seconds) extends StreamAction

/**
 * The options of the query's next start change: `set` added or replaced, `drop` removed, and, when given,
 * what its foreachBatch does (`hook`). The checkpoint and the sink stay: a restart of the same application
 * with new settings (UpgradeContractSuite).
 */
final case class ChangeOptions(set: Map[String, String], drop: Set[String] = Set.empty, hook: Option[BatchHook] = None)
    extends StreamAction

/**
 * Stops the query inside a batch: its foreachBatch read the batch's records (the source pinned them) and
 * waits; the query is stopped there, before the sink wrote the batch and before Spark's commit log has it.
 */
final case class StopInsideBatch(within: FiniteDuration = 120.seconds) extends StreamAction
