package io.github.kafkashare.it.features

import scala.concurrent.duration._

import io.github.kafkashare.it.stream._
import io.github.kafkashare.spark.KafkaShareDecisions
import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.functions.{col, lit}

/**
 * `kafka.share.brokerDeadLetterTopic`: the broker's own dead-letter queue for share groups (KIP-1191,
 * Kafka 4.4 with share.version=2) receives the records the query REJECTs; where the cluster lacks it,
 * or the topic does not take dead letters, the query refuses to start, saying what to do.
 */
class BrokerDeadLettersSuite extends ShareStreamTest {

  /** Explicit mode: REJECTs the records whose key is a multiple of 5, the rest get the default (accept). */
  private final class RejectFifths(group: String) extends BatchHook {
    override def read(rows: DataFrame, batchId: Long): DataFrame = {
      KafkaShareDecisions.acknowledge(
        rows.filter(col("key").cast("int") % 5 === 0).select(col("topic"), col("partition"), col("offset"), lit("reject").as("decision")),
        batchId,
        group
      )
      rows
    }
  }

  private def explicitOptions(deadLetters: String) = Seq(
    "kafka.share.acknowledgment.mode"   -> "explicit",
    "kafka.share.brokerDeadLetterTopic" -> deadLetters
  )

  for (version <- SharedBrokers.since("4.4"))
    test(s"records the query REJECTs go to the broker's dead-letter topic [Kafka $version]") {
      val prepared    = prepare(SharedBrokers.of(version))
      val deadLetters = fresh("dlq.orders") // the broker's errors.deadletterqueue.topic.name.prefix: "dlq."
      prepared.kafka.createTopic(deadLetters, 1)
      prepared.kafka.setTopicConfig(deadLetters, Map("errors.deadletterqueue.group.enable" -> "true"))
      val query = prepared.queryWith(new RejectFifths(prepared.group), "checkpoint-dedup", explicitOptions(deadLetters): _*)
      testStream(query)(
        AddRecords(prepared, 100),
        StartStream(),
        CheckLanded(100),
        StopStream,
        Assert("the broker copied every rejected record, and only those, to the dead-letter topic") { _ =>
          var letters = Seq.empty[String]
          eventually(60.seconds, "20 dead letters") { letters = prepared.kafka.readTopic(deadLetters); letters.size >= 20 }
          info(s"a dead letter: ${letters.head}")
          assert(letters.size == 20, letters.take(3).mkString("\n"))
          val keys = letters.map(l => "\"key\":\"([^\"]*)\"".r.findFirstMatchIn(l).map(_.group(1)).getOrElse(""))
          assert(keys.toSet == (0 until 100 by 5).map(_.toString).toSet, letters.take(3).mkString("\n"))
        }
      )
    }

  for (version <- SharedBrokers.since("4.4"))
    test(s"a dead-letter topic that does not take the group's dead letters is refused at start [Kafka $version]") {
      val prepared    = prepare(SharedBrokers.of(version))
      val deadLetters = fresh("dlq.orders")
      prepared.kafka.createTopic(deadLetters, 1) // without errors.deadletterqueue.group.enable
      testStream(prepared.query("checkpoint-dedup", explicitOptions(deadLetters): _*))(
        StartStream(),
        ExpectFailure("errors.deadletterqueue.group.enable=true")
      )
    }

  for (version <- SharedBrokers.since("4.4"))
    test(s"a dead-letter topic without the broker's prefix is refused at start, naming it [Kafka $version]") {
      val prepared    = prepare(SharedBrokers.of(version))
      val deadLetters = fresh("dead-letters")
      prepared.kafka.createTopic(deadLetters, 1)
      prepared.kafka.setTopicConfig(deadLetters, Map("errors.deadletterqueue.group.enable" -> "true"))
      testStream(prepared.query("checkpoint-dedup", explicitOptions(deadLetters): _*))(
        StartStream(),
        ExpectFailure("does not start with 'dlq.'")
      )
    }

  for (version <- SharedBrokers.versions.filterNot(SharedBrokers.since("4.4").contains).lastOption)
    test(s"a broker without its own dead-letter queue is refused at start, naming the source's [Kafka $version]") {
      val prepared = prepare(SharedBrokers.of(version))
      testStream(prepared.query("checkpoint-dedup", explicitOptions(fresh("dead-letters")): _*))(
        StartStream(),
        ExpectFailure("kafka.share.deadLetterTopic")
      )
    }
}
