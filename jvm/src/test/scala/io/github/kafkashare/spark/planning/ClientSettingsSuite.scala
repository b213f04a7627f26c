package io.github.kafkashare.spark.planning

import io.github.kafkashare.spark.options.ShareSourceOptions
import org.scalatest.funsuite.AnyFunSuite

class ClientSettingsSuite extends AnyFunSuite {
  private def options(extra: (String, String)*) =
    ShareSourceOptions.parse(Map("kafka.bootstrap.servers" -> "b:9092", "kafka.share.group.id" -> "g", "subscribe" -> "t") ++ extra)

  test("a task's share of maxRecordsPerTrigger rounds up, and never overflows") {
    assert(ClientSettings.shareOf(100, 4) == 25)
    assert(ClientSettings.shareOf(101, 4) == 26)
    assert(ClientSettings.shareOf(1, 8) == 1)
    assert(ClientSettings.shareOf(Long.MaxValue, 2) == Long.MaxValue / 2 + 1)
  }

  private def settings(
      o: ShareSourceOptions,
      parallelism: Int,
      partitions: Int = 2,
      lockLimit: Option[Int] = Some(2000),
      strict: Boolean = false,
      renew: Boolean = true
  ) = ClientSettings.of(o, parallelism, partitions, lockLimit, strict, renew)

  test("a share below Kafka's default becomes max.poll.records, unless the user set it") {
    assert(settings(options("maxRecordsPerTrigger" -> "100"), 4).get("max.poll.records").contains("25"))
    assert(settings(options("maxRecordsPerTrigger" -> "100", "kafka.max.poll.records" -> "2000"), 4)("max.poll.records") == "2000")
    assert(!settings(options("maxRecordsPerTrigger" -> "4000"), 4).contains("max.poll.records"))
    assert(!settings(options(), 4).contains("max.poll.records"))
    assert(!settings(options("maxRecordsPerTrigger" -> Long.MaxValue.toString), 2).contains("max.poll.records"))
  }

  test("a task that holds its records until the commit polls once: its poll is its share of the batch and of the lock limit") {
    val twoPhase = options("kafka.share.exactly.once.strategy" -> "two-phase-commit")
    // 4 consumers on 2 partitions: 2 per partition share each partition's 2,000 locks.
    assert(settings(twoPhase, 4)("max.poll.records") == "1000")
    assert(settings(twoPhase, 2, lockLimit = Some(10000))("max.poll.records") == "10000")
    assert(settings(twoPhase, 4, partitions = 0, lockLimit = Some(10000))("max.poll.records") == "2500") // partitions unknown: all on one
    // maxRecordsPerTrigger bounds it too, above Kafka's default as well (such a task cannot poll again).
    val bounded = options("kafka.share.exactly.once.strategy" -> "two-phase-commit", "maxRecordsPerTrigger" -> "3000")
    assert(settings(bounded, 2, lockLimit = Some(10000))("max.poll.records") == "1500")
    assert(!settings(twoPhase, 4, lockLimit = None).contains("max.poll.records"))
    val explicit = options("kafka.share.acknowledgment.mode" -> "explicit")
    assert(settings(explicit, 1, partitions = 1, lockLimit = Some(4000))("max.poll.records") == "4000")
    // Without RENEW (Kafka 4.1) a batch must fit in one lock: polls keep the sizes they had.
    assert(!settings(twoPhase, 2, lockLimit = Some(10000), renew = false).contains("max.poll.records"))
    val userSet = options("kafka.share.exactly.once.strategy" -> "two-phase-commit", "kafka.max.poll.records" -> "300")
    assert(settings(userSet, 2, lockLimit = Some(10000))("max.poll.records") == "300")
  }

  test("strict acquisition where the cluster has it and a task takes a bounded part") {
    val bounded = options("maxRecordsPerTrigger" -> "1000")
    assert(settings(bounded, 2, strict = true).get("share.acquire.mode").contains("record_limit"))
    assert(!settings(bounded, 2).contains("share.acquire.mode"))
    val twoPhase = options("kafka.share.exactly.once.strategy" -> "two-phase-commit")
    assert(settings(twoPhase, 2, strict = true).get("share.acquire.mode").contains("record_limit"))
    // Tasks that poll on while there is a backlog read a fetch's rest themselves: no cost in throughput there.
    assert(!settings(options(), 2, strict = true).contains("share.acquire.mode"))
  }
}
