package io.github.kafkashare.spark.options

import io.github.kafkashare.spark.errors.ShareSourceException
import org.scalatest.funsuite.AnyFunSuite

class ShareSourceOptionsSuite extends AnyFunSuite {

  private val required = Map("kafka.bootstrap.servers" -> "b:9092", "kafka.share.group.id" -> "g", "subscribe" -> "a, b")

  private def failure(options: Map[String, String]): String =
    intercept[ShareSourceException](ShareSourceOptions.parse(options)).getMessage

  /** `key` is refused as unknown, with `meant` suggested. */
  private def assertSuggests(key: String, meant: String): Unit = {
    val message = failure(required + (key -> "x"))
    assert(message.contains(s"option '$key' is not an option of kafka-share; did you mean '$meant'?"), message)
  }

  test("defaults") {
    val o = ShareSourceOptions.parse(required)
    assert(o.subscription == Subscription.Topics(Seq("a", "b")))
    assert(o.strategy == ExactlyOnceStrategy.None)
    assert(o.startingOffsets.isEmpty) // the group's share.auto.offset.reset applies
    assert(o.parallelism.isEmpty && o.lockTimeoutMs.isEmpty && o.maxRecordsPerTrigger.isEmpty)
    assert(!o.includeHeaders && o.failOnDataLoss)
    assert(o.kafkaParams == Map("bootstrap.servers" -> "b:9092"), "source options are not client settings")
    assert(o.readDurationMs == 1000L)
  }

  test("bounds and topic names are checked as declared (the Python builder checks the same declarations)") {
    OptionDeclarations.all.foreach { d =>
      d.kind match {
        case OptionKind.Whole(min, max) if max < Long.MaxValue =>
          val tooBig = failure(required + (d.key -> (max + 1).toString) ++ requirementsOf(d.key))
          assert(
            tooBig.contains(s"option '${d.key}' has the invalid value '${max + 1}'; expected a whole number between $min and $max"),
            tooBig
          )
          ShareSourceOptions.parse(required + (d.key -> max.toString) ++ requirementsOf(d.key))
        case _ =>
      }
    }
    assert(failure(required + ("subscribe" -> "orders,bad topic")).contains("'bad topic'; expected a Kafka topic name"))
    assert(failure(required ++ requirementsOf("kafka.share.deadLetterTopic") + ("kafka.share.deadLetterTopic" -> "..")).contains(
      "expected a Kafka topic name"
    ))
  }

  /** The options an option applies only with. */
  private def requirementsOf(key: String): Map[String, String] = key match {
    case "kafka.share.deadLetterTopic" => Map("kafka.share.maxDeliveries" -> "3")
    case "kafka.share.minParallelism" | "kafka.share.maxParallelism" | "kafka.share.backlog.drain.ms" =>
      Map("kafka.share.parallelism" -> "auto")
    case _ => Map.empty
  }

  test("parallelism auto: bounds and the drain time, only with auto; a maximum below the minimum is refused") {
    val auto = ShareSourceOptions.parse(required + ("kafka.share.parallelism" -> "AUTO"))
    assert(auto.parallelism.isEmpty && auto.elastic.contains(ElasticBounds(1, None, 10000L)))
    val bounded = ShareSourceOptions.parse(required ++ Map(
      "kafka.share.parallelism"      -> "auto",
      "kafka.share.minParallelism"   -> "2",
      "kafka.share.maxParallelism"   -> "16",
      "kafka.share.backlog.drain.ms" -> "30000"
    ))
    assert(bounded.elastic.contains(ElasticBounds(2, Some(16), 30000L)))
    assert(ShareSourceOptions.parse(required + ("kafka.share.parallelism" -> "4")).elastic.isEmpty)
    Seq("kafka.share.minParallelism", "kafka.share.maxParallelism", "kafka.share.backlog.drain.ms").foreach { key =>
      val value = if (key.endsWith(".ms")) "5000" else "2"
      assert(failure(required ++ Map("kafka.share.parallelism" -> "4", key -> value))
        .contains(s"'$key' applies only with 'kafka.share.parallelism=auto'"))
    }
    assert(failure(required ++ Map(
      "kafka.share.parallelism"    -> "auto",
      "kafka.share.minParallelism" -> "8",
      "kafka.share.maxParallelism" -> "4"
    ))
      .contains("expected a whole number, at least kafka.share.minParallelism (8)"))
    assert(failure(required + ("kafka.share.parallelism" -> "automatic"))
      .contains("'automatic'; expected 'auto', or a whole number between 1 and 100000"))
    assert(failure(required + ("kafka.share.parallelism" -> "0")).contains("expected 'auto', or a whole number between 1 and 100000"))
  }

  test("read duration: 0 polls once; negative or not a number names the option") {
    assert(ShareSourceOptions.parse(required + ("kafka.share.read.duration.ms" -> "0")).readDurationMs == 0L)
    assert(ShareSourceOptions.parse(required + ("kafka.share.read.duration.ms" -> "2500")).readDurationMs == 2500L)
    Seq("-1", "1s", "").foreach { bad =>
      val e = intercept[ShareSourceException](ShareSourceOptions.parse(required + ("kafka.share.read.duration.ms" -> bad)))
      assert(e.getMessage.contains("kafka.share.read.duration.ms") && e.getMessage.contains("between 0 and"), e.getMessage)
    }
  }

  test("option names are case-insensitive, values of enums too") {
    val o = ShareSourceOptions.parse(Map(
      "KAFKA.BOOTSTRAP.SERVERS"           -> "b:9092",
      "Kafka.Share.Group.Id"              -> "g",
      "SubscribePattern"                  -> "orders-.*",
      "kafka.share.exactly.once.strategy" -> "Two-Phase-Commit",
      "STARTINGOFFSETS"                   -> "EARLIEST",
      "includeheaders"                    -> "TRUE",
      "kafka.share.parallelism"           -> "8"
    ))
    assert(o.subscription == Subscription.TopicPattern("orders-.*"))
    assert(o.strategy == ExactlyOnceStrategy.TwoPhaseCommit)
    assert(o.startingOffsets.contains(StartingOffsets.Earliest) && o.includeHeaders && o.parallelism.contains(8))
  }

  test("every strategy by its documented name") {
    ExactlyOnceStrategy.all.foreach { s =>
      assert(ShareSourceOptions.parse(required + ("kafka.share.exactly.once.strategy" -> s.name)).strategy == s)
    }
  }

  test("a missing required option is named, with an example") {
    assert(failure(required - "kafka.bootstrap.servers").contains("option 'kafka.bootstrap.servers' is required"))
    assert(failure(required - "kafka.share.group.id").contains("option 'kafka.share.group.id' is required"))
    assert(failure(required + ("kafka.share.group.id" -> " ")).contains("'kafka.share.group.id' is required"))
  }

  test("exactly one of subscribe and subscribePattern") {
    assert(failure(required - "subscribe").contains("got neither"))
    assert(failure(required + ("subscribePattern" -> "x")).contains("got subscribe and subscribePattern"))
    assert(failure(required + ("subscribe" -> " , ")).contains("'subscribe' has the invalid value"))
    assert(failure(required - "subscribe" + ("subscribePattern" -> "(")).contains("a Java regular expression"))
  }

  test("invalid values name the option and what is expected") {
    val cases = Seq(
      "kafka.share.exactly.once.strategy" -> "exactly-once"      -> "one of 'none', 'idempotent', 'checkpoint-dedup', 'two-phase-commit'",
      "kafka.share.acknowledgment.mode"   -> "auto"              -> "'implicit' or 'explicit'",
      "kafka.share.parallelism"           -> "0"                 -> "a whole number between 1 and 100000",
      "kafka.share.parallelism"           -> "four"              -> "a whole number between 1 and 100000",
      "maxRecordsPerTrigger"              -> "-5"                -> "a whole number between 1 and",
      "kafka.share.lock.timeout.ms"       -> "99999999999"       -> "a whole number between 1 and 3600000",
      "startingOffsets"                   -> "{\"t\":{\"0\":5}}" -> "one of 'earliest', 'latest'",
      "includeHeaders"                    -> "yes"               -> "'true' or 'false'",
      "failOnDataLoss"                    -> "1"                 -> "'true' or 'false'"
    )
    cases.foreach { case ((key, value), expected) =>
      val message = failure(required + (key -> value))
      assert(message.contains(s"option '$key' has the invalid value '$value'"), message)
      assert(message.contains(expected), message)
    }
  }

  test("explicit acknowledgement: a default decision, and records held until the batch commits") {
    val o = ShareSourceOptions.parse(required + ("kafka.share.acknowledgment.mode" -> "Explicit"))
    assert(o.mode == AcknowledgmentMode.Explicit(Decision.Accept) && o.holdsUntilCommit)
    val r = ShareSourceOptions.parse(required ++ Map(
      "kafka.share.acknowledgment.mode"    -> "explicit",
      "kafka.share.acknowledgment.default" -> "RELEASE"
    ))
    assert(r.mode == AcknowledgmentMode.Explicit(Decision.Release))
    assert(!ShareSourceOptions.parse(required).holdsUntilCommit)
    assert(failure(required + ("kafka.share.acknowledgment.default" -> "release"))
      .contains("'kafka.share.acknowledgment.default' applies only with 'kafka.share.acknowledgment.mode=explicit'"))
    assert(failure(required ++ Map("kafka.share.acknowledgment.mode" -> "explicit", "kafka.share.acknowledgment.default" -> "reject"))
      .contains("one of 'accept', 'release'"))
  }

  test("poison records: the highest delivery count, and a dead-letter topic only with it") {
    val o = ShareSourceOptions.parse(required ++ Map("kafka.share.maxDeliveries" -> "3", "kafka.share.deadLetterTopic" -> "dlt.orders"))
    assert(o.poison.contains(PoisonPolicy(3, Some("dlt.orders"))))
    assert(ShareSourceOptions.parse(required).poison.isEmpty)
    assert(failure(required + ("kafka.share.deadLetterTopic" -> "dlt"))
      .contains("'kafka.share.deadLetterTopic' applies only with 'kafka.share.maxDeliveries'"))
    assert(failure(required ++ Map("kafka.share.maxDeliveries" -> "2", "kafka.share.deadLetterTopic" -> "bad topic"))
      .contains("expected a Kafka topic name"))
    assert(failure(required + ("kafka.share.maxDeliveries" -> "0")).contains("a whole number between 1 and 1000"))
  }

  test("client settings a share consumer rejects are refused with the alternative") {
    Seq(
      "auto.offset.reset"  -> "startingOffsets",
      "enable.auto.commit" -> "acknowledges records itself",
      "group.id"           -> "kafka.share.group.id",
      "isolation.level"    -> "share.isolation.level",
      "session.timeout.ms" -> "share.session.timeout.ms",
      "group.instance.id"  -> "static membership",
      "key.deserializer"   -> "as bytes"
    ).foreach { case (key, instead) =>
      val message = failure(required + (s"kafka.$key" -> "x"))
      assert(message.contains(s"option 'kafka.$key' cannot be used with a share group") && message.contains(instead), message)
    }
  }

  test("other kafka.* settings reach the clients, prefix removed") {
    val o = ShareSourceOptions.parse(required ++ Map("kafka.security.protocol" -> "SASL_SSL", "kafka.fetch.max.bytes" -> "1000"))
    assert(o.kafkaParams == Map("bootstrap.servers" -> "b:9092", "security.protocol" -> "SASL_SSL", "fetch.max.bytes" -> "1000"))
  }

  test("a misspelled option is an error with a suggestion, not a silent default") {
    Seq(
      "kafka.share.exactly_once.strategy" -> "kafka.share.exactly.once.strategy", // would leave the strategy at none
      "kafka.share.paralelism"            -> "kafka.share.parallelism",
      "subcribe"                          -> "subscribe",
      "maxRecordPerTrigger"               -> "maxRecordsPerTrigger",
      "IncludeHeader"                     -> "includeHeaders"
    ).foreach { case (typo, meant) => assertSuggests(typo, meant) }
    val far = failure(required + ("checkpointLocation" -> "/tmp/x"))
    assert(far.contains("option 'checkpointLocation' is not an option of kafka-share") && !far.contains("did you mean"), far)
    assert(far.contains("docs/reference/options.md"), far)
  }

  test("options of Spark's built-in Kafka source name what to use instead") {
    Seq(
      "maxOffsetsPerTrigger" -> "maxRecordsPerTrigger",
      "minPartitions"        -> "kafka.share.parallelism",
      "startingTimestamp"    -> "startingOffsets",
      "assign"               -> "subscribe",
      "endingOffsets"        -> "Trigger.AvailableNow",
      "groupIdPrefix"        -> "kafka.share.group.id"
    ).foreach { case (key, instead) =>
      val message = failure(required + (key -> "1"))
      assert(message.contains(s"option '$key' belongs to Spark's built-in Kafka source") && message.contains(instead), message)
    }
  }

  test("unknown keys are refused, but Kafka client settings pass and refused ones keep their own message") {
    assert(ShareSourceOptions.parse(required + ("kafka.max.poll.records" -> "100")).kafkaParams("max.poll.records") == "100")
    val refused = failure(required + ("kafka.share.acknowledgement.mode" -> "implicit"))
    assert(refused.contains("cannot be used with a share group") && refused.contains("kafka.share.acknowledgment.mode"), refused)
    val unknownShare = failure(required + ("kafka.share.acquire.mode" -> "record_limit"))
    assert(unknownShare.contains("option 'kafka.share.acquire.mode' is not an option of kafka-share"), unknownShare)
  }

  test("a source option spelt as a client setting is refused, with the source option suggested") {
    Seq(
      "kafka.exactly.once.strategy"        -> "kafka.share.exactly.once.strategy", // 'share.' left out
      "kafka.shares.exactly.once.strategy" -> "kafka.share.exactly.once.strategy",
      "kafka.share.group"                  -> "kafka.share.group.id",
      "bootstrap.servers"                  -> "kafka.bootstrap.servers",           // the 'kafka.' prefix left out
      "parallelism"                        -> "kafka.share.parallelism"
    ).foreach { case (key, meant) => assertSuggests(key, meant) }
  }

  test("a table defined in SQL: the keys Spark adds (reserved properties, path, option.<key>) are accepted") {
    // As V2SessionCatalog hands a table's properties to the provider.
    val table = required.flatMap { case (k, v) => Seq(k -> v, s"option.$k" -> v) } ++
      Map("provider" -> "kafka-share", "owner" -> "me", "location" -> "file:/w/t", "path" -> "file:/w/t", "is_managed_location" -> "true")
    assert(ShareSourceOptions.parse(table).groupId == "g")
    val typo = failure(table ++ Map("kafka.share.paralelism" -> "2", "option.kafka.share.paralelism" -> "2"))
    assert(typo.contains("did you mean 'kafka.share.parallelism'?"), typo)
  }
}
