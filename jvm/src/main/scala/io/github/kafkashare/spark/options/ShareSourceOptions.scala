package io.github.kafkashare.spark.options

import java.util.Locale
import java.util.regex.{Pattern, PatternSyntaxException}

import io.github.kafkashare.spark.errors.ShareSourceErrors
import org.apache.spark.sql.connector.catalog.TableCatalog

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

/** Who decides what happens to each record: the source (implicit) or the query's foreachBatch (explicit). */
sealed trait AcknowledgmentMode
object AcknowledgmentMode {
  case object Implicit extends AcknowledgmentMode

  /** Decisions from foreachBatch, applied after the batch commits; undecided records get `default`. */
  final case class Explicit(default: Decision) extends AcknowledgmentMode
}

/** What a consumer does with a record it acquired. */
sealed abstract class Decision(val name: String)
object Decision {
  case object Accept  extends Decision("accept")
  case object Release extends Decision("release")
  case object Reject  extends Decision("reject")
  val all: Seq[Decision]                     = Seq(Accept, Release, Reject)
  def parse(value: String): Option[Decision] = all.find(_.name.equalsIgnoreCase(value.trim))
}

/**
 * `kafka.share.parallelism=auto`: each batch's read tasks between `min` and `max` (None: the application's task
 * slots), so that the backlog drains within `drainMs`.
 */
final case class ElasticBounds(min: Int, max: Option[Int], drainMs: Long)

/** Poison records: records delivered more than `maxDeliveries` times are not emitted but REJECTed. */
final case class PoisonPolicy(maxDeliveries: Int, deadLetterTopic: Option[String])

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
    startingOffsets: Option[StartingOffsets],
    pollTimeoutMs: Long,
    failOnDataLoss: Boolean,
    kafkaParams: Map[String, String],
    mode: AcknowledgmentMode = AcknowledgmentMode.Implicit,
    poison: Option[PoisonPolicy] = None,
    readDurationMs: Long = OptionDeclarations.DefaultReadDurationMs,
    brokerDeadLetterTopic: Option[String] = None,
    elastic: Option[ElasticBounds] = None
) {

  /** Whether read tasks keep their records acquired until the batch commits (ACCEPT or decisions after commit). */
  def holdsUntilCommit: Boolean = strategy.acceptsAfterCommit || mode != AcknowledgmentMode.Implicit
}

object ShareSourceOptions {
  import OptionDeclarations._

  /** Parses options given in any letter case (Spark's options are case-insensitive). */
  def parse(supplied: Map[String, String]): ShareSourceOptions = {
    rejectUnknown(supplied.keys)
    val lower                            = supplied.map { case (k, v) => k.toLowerCase(Locale.ROOT) -> v }
    def get(key: String): Option[String] = lower.get(key.toLowerCase(Locale.ROOT)).map(_.trim)
    def required(key: String, example: String): String =
      get(key).filter(_.nonEmpty).getOrElse(throw ShareSourceErrors.missingOption(key, example))

    val bootstrap = required(BootstrapServers, "broker1:9092,broker2:9092")
    val group     = required(GroupId, "orders-processing")

    val mode          = parseMode(get)
    val maxDeliveries = get(MaxDeliveries).map(v => whole(MaxDeliveries, v).toInt)
    val deadLetter = get(DeadLetterTopic).map { t =>
      if (!OptionKind.isTopicName(t)) throw ShareSourceErrors.invalidValue(DeadLetterTopic, t, TopicNameRule)
      if (maxDeliveries.isEmpty) throw ShareSourceErrors.onlyWith(DeadLetterTopic, MaxDeliveries)
      t
    }
    val brokerDeadLetters = get(BrokerDeadLetters).map { t =>
      if (!OptionKind.isTopicName(t)) throw ShareSourceErrors.invalidValue(BrokerDeadLetters, t, TopicNameRule)
      // Both would copy a poison record twice: the source before it REJECTs it, the broker when it does.
      if (deadLetter.nonEmpty) throw ShareSourceErrors.notTogether(BrokerDeadLetters, DeadLetterTopic)
      t
    }

    ShareSourceOptions(
      bootstrapServers = bootstrap,
      groupId = group,
      subscription = parseSubscription(get(Subscribe), get(SubscribePattern)),
      strategy = enumValue(Strategy, get(Strategy), ExactlyOnceStrategy.all.map(s => s.name -> s), ExactlyOnceStrategy.None),
      parallelism = get(Parallelism).filterNot(isAuto).map(v => whole(Parallelism, v).toInt),
      lockTimeoutMs = get(LockTimeoutMs).map(v => whole(LockTimeoutMs, v)),
      includeHeaders = get(IncludeHeaders).exists(v => boolean(IncludeHeaders, v)),
      maxRecordsPerTrigger = get(MaxRecordsPerTrigger).map(v => whole(MaxRecordsPerTrigger, v)),
      // Unset, the group's own share.auto.offset.reset applies: the group is the authority on where it
      // reads, and users set it there (kafka-configs.sh) as Kafka's docs tell them.
      startingOffsets = get(StartingOffsetsKey).map(v =>
        enumValue(
          StartingOffsetsKey,
          Some(v),
          Seq("earliest" -> StartingOffsets.Earliest, "latest" -> StartingOffsets.Latest),
          StartingOffsets.Latest
        )
      ),
      pollTimeoutMs = get(PollTimeoutMs).map(v => whole(PollTimeoutMs, v)).getOrElse(DefaultPollTimeoutMs),
      failOnDataLoss = get(FailOnDataLoss).forall(v => boolean(FailOnDataLoss, v)),
      kafkaParams = kafkaParams(lower),
      mode = mode,
      poison = maxDeliveries.map(PoisonPolicy(_, deadLetter)),
      brokerDeadLetterTopic = brokerDeadLetters,
      elastic = elasticBounds(get),
      readDurationMs = get(ReadDurationMs).map(v => whole(ReadDurationMs, v))
        .getOrElse(DefaultReadDurationMs)
    )
  }

  private def isAuto(value: String): Boolean = value.equalsIgnoreCase("auto")

  /** kafka.share.parallelism=auto and its bounds; the bounds alone are refused (they would do nothing). */
  private def elasticBounds(get: String => Option[String]): Option[ElasticBounds] = {
    val min   = get(MinParallelism).map(v => whole(MinParallelism, v).toInt)
    val max   = get(MaxParallelism).map(v => whole(MaxParallelism, v).toInt)
    val drain = get(BacklogDrainMs).map(v => whole(BacklogDrainMs, v))
    if (!get(Parallelism).exists(isAuto)) {
      Seq(MinParallelism -> min, MaxParallelism -> max, BacklogDrainMs -> drain).collectFirst { case (key, Some(_)) => key }
        .foreach(key => throw ShareSourceErrors.onlyWith(key, s"$Parallelism=auto"))
      None
    } else {
      for (lo <- min; hi <- max if hi < lo)
        throw ShareSourceErrors.invalidValue(MaxParallelism, hi.toString, s"a whole number, at least $MinParallelism ($lo)")
      Some(ElasticBounds(min.getOrElse(1), max, drain.getOrElse(DefaultBacklogDrainMs)))
    }
  }

  /** kafka.share.acknowledgment.mode, with the default decision that only explicit mode takes. */
  private def parseMode(get: String => Option[String]): AcknowledgmentMode = {
    val defaultDecision = get(DefaultDecision).map(v =>
      enumValue(DefaultDecision, Some(v), Seq("accept" -> (Decision.Accept: Decision), "release" -> Decision.Release), Decision.Accept)
    )
    get(AckMode).map(_.toLowerCase(Locale.ROOT)).getOrElse("implicit") match {
      case "implicit" =>
        if (defaultDecision.nonEmpty) throw ShareSourceErrors.onlyWith(DefaultDecision, s"$AckMode=explicit")
        AcknowledgmentMode.Implicit
      case "explicit" => AcknowledgmentMode.Explicit(defaultDecision.getOrElse(Decision.Accept))
      case other      => throw ShareSourceErrors.invalidValue(AckMode, other, "'implicit' or 'explicit'")
    }
  }

  private def lowerCase(key: String): String = key.toLowerCase(Locale.ROOT)

  private val declared: Map[String, String] = all.map(_.key).filter(_ != "kafka.*").map(k => lowerCase(k) -> k).toMap
  private val builtIn: Map[String, String]  = BuiltInKafkaSourceOptions.map { case (k, v) => lowerCase(k) -> v }

  // What Spark adds itself when a table is defined in SQL (CREATE TABLE ... USING `kafka-share`
  // OPTIONS (...)): the table's reserved properties (TableCatalog.PROP_*: provider, owner, location,
  // ...), the location again as 'path', and each option again as 'option.<key>'. Read from Spark's
  // class, so that a newer Spark's additions are known too.
  private val sparkTableKeys: Set[String] =
    classOf[TableCatalog].getFields.toSeq.filter(_.getName.startsWith("PROP_")).map(f => lowerCase(f.get(null).toString)).toSet + "path"

  /**
   * Every key must mean something: an option of this source, or a Kafka client setting (`kafka.` and
   * not `kafka.share.`, the source's own prefix). A typo such as 'kafka.share.exactly_once.strategy'
   * would otherwise leave the strategy at none, at-least-once for a user who asked for exactly-once.
   * A `kafka.` key that is one of this source's options with `share.` dropped or misspelt is refused too:
   * passed to the client, it would be ignored the same way.
   */
  private def rejectUnknown(keys: Iterable[String]): Unit = keys.toSeq.sorted.foreach { key =>
    val k = lowerCase(key)
    builtIn.get(k).foreach(instead => throw ShareSourceErrors.builtInKafkaSourceOption(key, instead))
    val sparkAdded           = sparkTableKeys(k) || k.startsWith(TableCatalog.OPTION_PREFIX)
    val refusedClientSetting = RefusedKafkaOptions.contains(k.stripPrefix("kafka.")) // kafkaParams names the fix
    val clientSetting = k.startsWith("kafka.") && (refusedClientSetting ||
      !k.startsWith("kafka.share.") && nearSourceOption(k).isEmpty)
    if (!declared.contains(k) && !clientSetting && !sparkAdded) throw ShareSourceErrors.unknownOption(key, suggestion(k))
  }

  /** A source option this `kafka.` key seems meant as: its name without `share.`, or a near spelling of one. */
  private def nearSourceOption(k: String): Option[String] =
    declared.get("kafka.share." + k.stripPrefix("kafka.")).orElse(
      closestDeclared(k, maxDistance = 2).filter(lowerCase(_).startsWith("kafka.share."))
    )

  private def suggestion(k: String): Option[String] =
    declared.get("kafka." + k).orElse(declared.get("kafka.share." + k)).orElse(nearSourceOption(k))
      .orElse(closestDeclared(k, maxDistance = math.max(2, k.length / 5)))

  private def closestDeclared(key: String, maxDistance: Int): Option[String] =
    declared.toSeq.map { case (k, original) => (editDistance(key, k), original) }
      .filter { case (d, _) => d <= maxDistance }
      .minByOption { case (d, original) => (d, original) }
      .map(_._2)

  private def editDistance(a: String, b: String): Int = {
    var previous = Array.tabulate(b.length + 1)(identity)
    for (i <- 1 to a.length) {
      val current = new Array[Int](b.length + 1)
      current(0) = i
      for (j <- 1 to b.length)
        current(j) = math.min(math.min(current(j - 1), previous(j)) + 1, previous(j - 1) + (if (a(i - 1) == b(j - 1)) 0 else 1))
      previous = current
    }
    previous(b.length)
  }

  private def parseSubscription(topics: Option[String], pattern: Option[String]): Subscription =
    (topics, pattern) match {
      case (Some(list), None) =>
        val names = list.split(",").map(_.trim).filter(_.nonEmpty).toSeq
        if (names.isEmpty) throw ShareSourceErrors.invalidValue(Subscribe, list, "a comma-separated list of topic names")
        names.filterNot(OptionKind.isTopicName).foreach(n => throw ShareSourceErrors.invalidValue(Subscribe, n, TopicNameRule))
        Subscription.Topics(names.distinct)
      case (None, Some(regex)) =>
        if (regex.isEmpty) throw ShareSourceErrors.invalidValue(SubscribePattern, regex, "a Java regular expression")
        try { Pattern.compile(regex); Subscription.TopicPattern(regex) }
        catch {
          case e: PatternSyntaxException =>
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
        k -> ShadedClassNames.rewrite(k, v)
      }

  /** One of the values the option declares, as the typed value `choices` gives it. */
  private def enumValue[T](key: String, value: Option[String], choices: Seq[(String, T)], default: T): T = {
    val declared = kindOf(key) match {
      case OptionKind.Choice(values) => values
      case other                     => throw new IllegalStateException(s"$key is declared ${other.name}, not a choice")
    }
    require(declared == choices.map(_._1), s"$key: the parser's choices ${choices.map(_._1)} are not the declared $declared")
    value match {
      case None => default
      case Some(v) => choices.collectFirst { case (name, t) if name.equalsIgnoreCase(v) => t }
          .getOrElse(throw ShareSourceErrors.invalidValue(key, v, s"one of ${declared.map(c => s"'$c'").mkString(", ")}"))
    }
  }

  private val TopicNameRule = "a Kafka topic name (letters, digits, '.', '_' and '-', at most 249)"

  /** A whole number within the bounds the option declares. */
  private def whole(key: String, value: String): Long = kindOf(key) match {
    case OptionKind.Whole(min, max)       => wholeNumber(key, value, min, max)
    case OptionKind.WholeOrAuto(min, max) => wholeNumber(key, value, min, max, "'auto', or ")
    case other                            => throw new IllegalStateException(s"$key is declared ${other.name}, not a whole number")
  }

  private def wholeNumber(key: String, value: String, min: Long, max: Long, or: String = ""): Long = {
    def invalid = ShareSourceErrors.invalidValue(key, value, s"${or}a whole number between $min and $max")
    val parsed =
      try value.toLong
      catch { case _: NumberFormatException => throw invalid }
    if (parsed < min || parsed > max) throw invalid
    parsed
  }

  private def boolean(key: String, value: String): Boolean = value.toLowerCase(Locale.ROOT) match {
    case "true"  => true
    case "false" => false
    case _       => throw ShareSourceErrors.invalidValue(key, value, "'true' or 'false'")
  }
}
