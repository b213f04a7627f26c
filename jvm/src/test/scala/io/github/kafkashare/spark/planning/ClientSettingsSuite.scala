package io.github.kafkashare.spark.planning

import io.github.kafkashare.spark.options.ShareSourceOptions
import org.scalatest.funsuite.AnyFunSuite

class ClientSettingsSuite extends AnyFunSuite {
  private def options(extra: (String, String)*) =
    ShareSourceOptions.parse(Map("kafka.bootstrap.servers" -> "b:9092", "kafka.share.group.id" -> "g", "subscribe" -> "t") ++ extra)

  test("a task's share of maxRecordsPerTrigger rounds up, and never overflows") {
    assert(KafkaShareMicroBatchStream.shareOf(100, 4) == 25)
    assert(KafkaShareMicroBatchStream.shareOf(101, 4) == 26)
    assert(KafkaShareMicroBatchStream.shareOf(1, 8) == 1)
    assert(KafkaShareMicroBatchStream.shareOf(Long.MaxValue, 2) == Long.MaxValue / 2 + 1)
  }

  test("a share below Kafka's default becomes max.poll.records, unless the user set it") {
    val settings = KafkaShareMicroBatchStream.clientSettings _
    assert(settings(options("maxRecordsPerTrigger" -> "100"), 4).get("max.poll.records").contains("25"))
    assert(settings(options("maxRecordsPerTrigger" -> "100", "kafka.max.poll.records" -> "2000"), 4)("max.poll.records") == "2000")
    assert(!settings(options("maxRecordsPerTrigger" -> "4000"), 4).contains("max.poll.records"))
    assert(!settings(options(), 4).contains("max.poll.records"))
    assert(!settings(options("maxRecordsPerTrigger" -> Long.MaxValue.toString), 2).contains("max.poll.records"))
  }
}
