package io.github.kafkashare.spark.options

import java.util.Locale
import java.util.regex.{Pattern, PatternSyntaxException}

import io.github.kafkashare.spark.errors.ShareSourceErrors

/** Which topics the query reads: a fixed list, or a regex matched against the cluster's topics. */
sealed trait Subscription
object Subscription {
  final case class Topics(names: Seq[String]) extends Subscription
  final case class TopicPattern(regex: String) extends Subscription {
    lazy val pattern: Pattern = Pattern.compile(regex)
  }
}

/** Where a share group that has no state yet starts: the group config `share.auto.offset.reset`. */
sealed abstract class StartingOffsets(val groupValue: String)
object StartingOffsets {
  case object Earliest extends StartingOffsets("earliest")
  case object Latest   extends StartingOffsets("latest")
}

/**
 * The source's options, validated once. Every option is declared in [[OptionDeclarations]] with its
 * default and meaning; this class holds the typed values.
 *
 * @param kafkaParams the `kafka.*` options meant for the Kafka clients, with the prefix removed
 *                    (bootstrap servers and security settings included, source options excluded)
 */
final case class ShareSourceOptions(
    bootstrapServers: String,
    groupId: String,
    subscription: Subscription,
    strategy: ExactlyOnceStrategy,
    parallelism: Option[Int],
    lockTimeoutMs: Option[Long],
    includeHeaders: Boolean,
    maxRecordsPerTrigger: Option[Long],
    startingOffsets: StartingOffsets,
    pollTimeoutMs: Long,
    failOnDataLoss: Boolean,
    kafkaParams: Map[String, String])

object ShareSourceOptions {
  import OptionDeclarations._

  /** Parses options given in any letter case (Spark's options are case-insensitive). */
  def parse(supplied: Map[String, String]): ShareSourceOptions = {
    val lower = supplied.map { case (k, v) => k.toLowerCase(Locale.ROOT) -> v }
    def get(key: String): Option[String] = lower.get(key.toLowerCase(Locale.ROOT)).map(_.trim)
    def required(key: String, example: String): String =
      get(key).filter(_.nonEmpty).getOrElse(throw ShareSourceErrors.missingOption(key, example))

    val bootstrap = required(BootstrapServers, "broker1:9092,broker2:9092")
    val group     = required(GroupId, "orders-processing")

    get(AcknowledgmentMode).map(_.toLowerCase(Locale.ROOT)).getOrElse("implicit") match {
      case "implicit" =>
      case "explicit" => throw ShareSourceErrors.explicitModeNotAvailable()
      case other      => throw ShareSourceErrors.invalidValue(AcknowledgmentMode, other, "'implicit' or 'explicit'")
    }

    ShareSourceOptions(
      bootstrapServers = bootstrap,
      groupId = group,
      subscription = parseSubscription(get(Subscribe), get(SubscribePattern)),
      strategy = enumValue(Strategy, get(Strategy), ExactlyOnceStrategy.all.map(s => s.name -> s), ExactlyOnceStrategy.None),
      parallelism = get(Parallelism).map(v => positiveLong(Parallelism, v, max = 100000).toInt),
      lockTimeoutMs = get(LockTimeoutMs).map(v => positiveLong(LockTimeoutMs, v, max = 3600000L)),
      includeHeaders = get(IncludeHeaders).exists(v => boolean(IncludeHeaders, v)),
      maxRecordsPerTrigger = get(MaxRecordsPerTrigger).map(v => positiveLong(MaxRecordsPerTrigger, v, max = Long.MaxValue)),
      startingOffsets = enumValue(StartingOffsetsKey, get(StartingOffsetsKey),
        Seq("earliest" -> StartingOffsets.Earliest, "latest" -> StartingOffsets.Latest), StartingOffsets.Latest),
      pollTimeoutMs = get(PollTimeoutMs).map(v => positiveLong(PollTimeoutMs, v, max = 600000L)).getOrElse(DefaultPollTimeoutMs),
      failOnDataLoss = get(FailOnDataLoss).forall(v => boolean(FailOnDataLoss, v)),
      kafkaParams = kafkaParams(lower)
    )
  }

  private def parseSubscription(topics: Option[String], pattern: Option[String]): Subscription =
    (topics, pattern) match {
      case (Some(list), None) =>
        val names = list.split(",").map(_.trim).filter(_.nonEmpty).toSeq
        if (names.isEmpty) throw ShareSourceErrors.invalidValue(Subscribe, list, "a comma-separated list of topic names")
        Subscription.Topics(names.distinct)
      case (None, Some(regex)) =>
        if (regex.isEmpty) throw ShareSourceErrors.invalidValue(SubscribePattern, regex, "a Java regular expression")
        try { Pattern.compile(regex); Subscription.TopicPattern(regex) }
        catch { case e: PatternSyntaxException =>
          throw ShareSourceErrors.invalidValue(SubscribePattern, regex, s"a Java regular expression (${e.getDescription})")
        }
      case _ => throw ShareSourceErrors.subscriptionCount(Seq(Subscribe -> topics, SubscribePattern -> pattern).collect {
        case (k, Some(_)) => k
      })
    }

  /** `kafka.*` options for the clients, after refusing the ones a share consumer cannot take. */
  private def kafkaParams(lower: Map[String, String]): Map[String, String] =
    lower.collect { case (k, v) if k.startsWith("kafka.") => k.stripPrefix("kafka.") -> v }
      .filter { case (k, _) => !k.startsWith("share.") || RefusedKafkaOptions.contains(k) }
      .map { case (k, v) =>
        RefusedKafkaOptions.get(k).foreach(instead => throw ShareSourceErrors.refusedKafkaOption(k, instead))
        k -> v
      }

  private def enumValue[T](key: String, value: Option[String], choices: Seq[(String, T)], default: T): T =
    value match {
      case None => default
      case Some(v) => choices.collectFirst { case (name, t) if name.equalsIgnoreCase(v) => t }
        .getOrElse(throw ShareSourceErrors.invalidValue(key, v, s"one of ${choices.map(c => s"'${c._1}'").mkString(", ")}"))
    }

  private def positiveLong(key: String, value: String, max: Long): Long = {
    val parsed = try value.toLong catch { case _: NumberFormatException =>
      throw ShareSourceErrors.invalidValue(key, value, s"a whole number between 1 and $max")
    }
    if (parsed < 1 || parsed > max) throw ShareSourceErrors.invalidValue(key, value, s"a whole number between 1 and $max")
    parsed
  }

  private def boolean(key: String, value: String): Boolean = value.toLowerCase(Locale.ROOT) match {
    case "true"  => true
    case "false" => false
    case _       => throw ShareSourceErrors.invalidValue(key, value, "'true' or 'false'")
  }
}
