package io.github.kafkashare.it.stream

import java.net.ServerSocket

import scala.util.control.NonFatal

import io.github.kafkashare.testkit.KafkaBroker

/**
 * Bad input and bad clusters stop a query at its start with an error that names the option or setting
 * and the fix. (Speculation, which is set when a Spark session starts, stays in test_source_errors.py.)
 */
class StartErrorsSuite extends ShareStreamTest {

  /** Starts a query to the noop sink with `options`; returns its error message and how long it took. */
  private def failureOf(options: Map[String, String]): (String, Double) = {
    val started = System.nanoTime
    val message =
      try {
        val query = spark.readStream.format("kafka-share").options(options).load().writeStream.format("noop")
          .option("checkpointLocation", TestDirs.create("checkpoint-").toString).start()
        try {
          query.awaitTermination(120000L)
          query.exception.map(e => s"${e.getMessage} ${Option(e.getCause).map(_.toString).getOrElse("")}").getOrElse("")
        } finally query.stop()
      } catch { case NonFatal(e) => s"${e.getMessage} ${Option(e.getCause).map(_.toString).getOrElse("")}" }
    (message, (System.nanoTime - started) / 1e9)
  }

  private def goodOptions(): (Prepared, Map[String, String]) = {
    val topic = prepare(partitions = 1)
    (
      topic,
      Map("kafka.bootstrap.servers" -> topic.broker.bootstrapServers, "kafka.share.group.id" -> topic.group, "subscribe" -> topic.topic)
    )
  }

  private def closedPort(): Int = {
    val s = new ServerSocket(0);
    try s.getLocalPort
    finally s.close()
  }

  private def expectMessage(options: Map[String, String], containing: String*): Unit = {
    val (message, _) = failureOf(options)
    containing.foreach(part => assert(message.contains(part), s"'$part' is not in: $message"))
  }

  test("a misspelled option or one of Spark's Kafka source fails at load, naming the option to use") {
    val (_, good) = goodOptions()
    // Ignored, the typo would leave the strategy at none: at-least-once for a query that asked for exactly-once.
    expectMessage(
      good + ("kafka.share.exactly_once.strategy" -> "two-phase-commit"),
      "option 'kafka.share.exactly_once.strategy' is not an option of kafka-share; did you mean 'kafka.share.exactly.once.strategy'?"
    )
    expectMessage(
      good + ("maxOffsetsPerTrigger" -> "1000"),
      "option 'maxOffsetsPerTrigger' belongs to Spark's built-in Kafka source",
      "maxRecordsPerTrigger"
    )
  }

  test("a batch read says that kafka-share is a streaming source") {
    val (_, good) = goodOptions()
    val error     = intercept[Exception](spark.read.format("kafka-share").options(good).load().count())
    assert(error.getMessage.contains("kafka-share is a streaming source: read it with spark.readStream"), error.getMessage)
  }

  test("a missing topic is named") {
    val (topic, good) = goodOptions()
    expectMessage(good + ("subscribe" -> s"${topic.topic},no-such-topic"), "topic(s) no-such-topic do not exist")
  }

  test("an unreachable broker is named within seconds, with the option") {
    val (_, good)       = goodOptions()
    val (message, secs) = failureOf(good + ("kafka.bootstrap.servers" -> s"127.0.0.1:${closedPort()}"))
    assert(message.contains("no Kafka broker answered at '127.0.0.1:") && message.contains("option 'kafka.bootstrap.servers'"), message)
    assert(secs < 20, s"took $secs s: refused connections are said within seconds, not after the client's 30 s of retries")
  }

  test("a bootstrap host that does not resolve is named at once, with the option") {
    val (_, good)       = goodOptions()
    val (message, secs) = failureOf(good + ("kafka.bootstrap.servers" -> "no-such-broker.invalid:9092"))
    assert(message.contains("no host of 'no-such-broker.invalid:9092' (option 'kafka.bootstrap.servers') resolves"), message)
    assert(secs < 10, s"took $secs s")
  }

  test("a bad option value names the option and the value") {
    val (_, good) = goodOptions()
    expectMessage(
      good + ("kafka.share.exactly.once.strategy" -> "exactly-once"),
      "option 'kafka.share.exactly.once.strategy' has the invalid value 'exactly-once'"
    )
  }

  test("a client setting a share consumer refuses names the alternative") {
    val (_, good) = goodOptions()
    expectMessage(good + ("kafka.auto.offset.reset" -> "earliest"), "use option 'startingOffsets'")
  }

  test("explicit acknowledgement without foreachBatch names the sink") {
    val (_, good) = goodOptions()
    expectMessage(
      good + ("kafka.share.acknowledgment.mode" -> "explicit"),
      "'explicit' needs a query whose foreachBatch gives the decisions",
      "NoopTable"
    )
  }

  test("a parallelism above the group's size names group.share.max.size") {
    // The broker's default group.share.max.size is 200: 500 consumers could never all join the group.
    val (_, good) = goodOptions()
    expectMessage(good + ("kafka.share.parallelism" -> "500"), "'kafka.share.parallelism' = 500", "group.share.max.size (200)")
  }

  for (version <- Seq(SharedBrokers.versions.head, SharedBrokers.versions.last).distinct)
    test(s"a broker without share groups says how to enable them [Kafka $version]") {
      val broker = KafkaBroker.start(version, TestDirs.create(s"kafka-no-share-$version-"), shareGroups = false)
      try expectMessage(
          Map("kafka.bootstrap.servers" -> broker.bootstrapServers, "kafka.share.group.id" -> "g", "subscribe" -> "t"),
          "does not serve share groups",
          "share.version=1"
        )
      finally broker.stop()
    }
}
