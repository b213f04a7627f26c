package io.github.kafkashare.spark.options

import java.util.Locale

import scala.util.Random

import io.github.kafkashare.spark.errors.ShareSourceException
import org.scalatest.funsuite.AnyFunSuite

/**
 * Hundreds of generated bad option sets (wrong types, unknown enum values, empty strings, huge numbers,
 * conflicting options). Each must either be a valid set or fail with the source's own error that names
 * one of the options it broke: never a NullPointerException, a NumberFormatException or a stack trace.
 */
class HostileOptionsSuite extends AnyFunSuite {
  import OptionDeclarations._

  private val valid = Map(BootstrapServers -> "b:9092", GroupId -> "g", Subscribe -> "orders")

  private val hostileValues = Seq(
    "",
    " ",
    "-1",
    "0",
    "1.5",
    "abc",
    "NaN",
    "null",
    "true?",
    "\u0000",
    "99999999999999999999",
    "9223372036854775808",
    "1e9",
    "0x10",
    "[",
    "x" * 10000,
    "é",
    " 5 "
  )

  /** Options with a type: any value outside it must be refused. */
  private val wholeNumbers = Map[String, BigInt](
    Parallelism          -> 100000,
    LockTimeoutMs        -> 3600000L,
    MaxRecordsPerTrigger -> Long.MaxValue,
    PollTimeoutMs        -> 600000L,
    MaxDeliveries        -> 1000
  )
  private val enums = Map(
    Strategy           -> ExactlyOnceStrategy.all.map(_.name),
    AckMode            -> Seq("implicit", "explicit"),
    StartingOffsetsKey -> Seq("earliest", "latest"),
    IncludeHeaders     -> Seq("true", "false"),
    FailOnDataLoss     -> Seq("true", "false"),
    DefaultDecision    -> Seq("accept", "release")
  )

  private val sourceOptions = OptionDeclarations.all.map(_.key).filterNot(_ == "kafka.*")

  private def mustRefuse(key: String, value: String): Boolean = {
    val v = value.trim
    if (wholeNumbers.contains(key)) v.isEmpty || !v.forall(_.isDigit) || BigInt(v) < 1 || BigInt(v) > wholeNumbers(key)
    else enums.get(key).exists(choices => !choices.exists(_.equalsIgnoreCase(v)))
  }

  /** Parses; returns None when valid, else the message, after checking it is the source's clear error. */
  private def outcome(options: Map[String, String], broken: Set[String]): Option[String] =
    try { ShareSourceOptions.parse(options); None }
    catch {
      case e: ShareSourceException =>
        val message = e.getMessage
        assert(message.startsWith("[KAFKA_SHARE_INVALID_OPTION.") && e.getCondition.startsWith("KAFKA_SHARE_INVALID_OPTION."), message)
        assert(!message.contains("\tat "), s"a stack trace in the message: $message")
        assert(
          broken.exists(k => message.toLowerCase(Locale.ROOT).contains(k.toLowerCase(Locale.ROOT))),
          s"options ${broken.mkString(", ")} broken, but the error names none of them: ${message.take(300)}"
        )
        Some(message)
      case other: Throwable =>
        fail(s"options ${broken.mkString(", ")} gave ${other.getClass.getName}, not the source's error: ${other.getMessage}", other)
    }

  test("one bad value at a time: every option, every hostile value") {
    var cases = 0
    for (key <- sourceOptions; value <- hostileValues) {
      val result = outcome(valid + (key -> value), Set(key) ++ (if (key == Subscribe) Set(SubscribePattern) else Set()))
      if (mustRefuse(key, value)) assert(result.nonEmpty, s"$key='${value.take(20)}' was accepted")
      cases += 1
    }
    assert(cases >= 250, cases)
  }

  test("two or three bad values at once, and conflicting options, from a seeded generator") {
    val seed    = 20261122L
    val random  = new Random(seed)
    val refused = RefusedKafkaOptions.keys.toSeq.sorted.map("kafka." + _)
    (1 to 400).foreach { i =>
      val keys    = random.shuffle(sourceOptions ++ refused).take(2 + random.nextInt(2))
      val options = keys.map(k => k -> hostileValues(random.nextInt(hostileValues.size))).toMap
      val broken  = keys.toSet ++ Set(Subscribe, SubscribePattern) // a pattern without subscribe conflicts with it
      val result  = withClue(s"seed $seed case $i: ") { outcome(valid ++ options, broken) }
      if (keys.exists(k => refused.contains(k) || mustRefuse(k, options(k))))
        assert(result.nonEmpty, s"seed $seed case $i: ${options.keys.mkString(", ")} accepted")
    }
  }

  test("missing required options and empty ones name the option") {
    Seq(BootstrapServers, GroupId).foreach { key =>
      Seq(valid - key, valid + (key -> ""), valid + (key -> "   ")).foreach { options =>
        assert(outcome(options, Set(key)).exists(_.contains("is required")))
      }
    }
    assert(outcome(valid - Subscribe, Set(Subscribe)).nonEmpty)
  }
}
