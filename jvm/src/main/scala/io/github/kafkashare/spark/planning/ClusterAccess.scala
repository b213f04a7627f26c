package io.github.kafkashare.spark.planning

import java.util.{Collections, Properties}
import java.util.concurrent.{ExecutionException, TimeUnit, TimeoutException}

import scala.jdk.CollectionConverters._
import scala.jdk.OptionConverters._
import scala.util.control.NonFatal

import io.github.kafkashare.spark.errors.{ShareSourceErrors, ShareSourceException}
import io.github.kafkashare.spark.options.{OptionDeclarations, ShareSourceOptions, StartingOffsets, Subscription}
import org.apache.kafka.clients.admin._
import org.apache.kafka.clients.consumer.{CloseOptions, ConsumerConfig, KafkaConsumer}
import org.apache.kafka.common.{KafkaException, KafkaFuture, TopicPartition}
import org.apache.kafka.common.serialization.ByteArrayDeserializer
import org.apache.kafka.common.config.{ConfigException, ConfigResource}
import org.apache.kafka.common.errors.{
  AuthenticationException,
  AuthorizationException,
  GroupIdNotFoundException,
  UnknownTopicOrPartitionException
}
import org.apache.spark.internal.Logging

/** Everything the driver asks the cluster, through one Admin client. Driver only. */
final class ClusterAccess(options: ShareSourceOptions) extends ClusterView with Logging {

  private val timeoutMs = ClusterAccess.TimeoutMs

  private lazy val admin: Admin = {
    val props = new Properties
    options.kafkaParams.foreach { case (k, v) => props.put(k, v) }
    props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, timeoutMs.toString)
    props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, math.min(timeoutMs, 15000L).toString)
    try Admin.create(props)
    catch {
      // The client refuses to start when no bootstrap host resolves; its own message names neither the option nor the host.
      case e: KafkaException
          if Iterator.iterate[Throwable](e)(_.getCause).takeWhile(_ != null).exists(c =>
            c.isInstanceOf[ConfigException] && String.valueOf(c.getMessage).contains("No resolvable bootstrap urls")
          ) =>
        throw ShareSourceErrors.bootstrapUnresolvable(options.bootstrapServers, e)
    }
  }

  /**
   * Fails with a clear error unless a broker answers and the cluster has share groups enabled.
   * Bootstrap addresses that refuse connections are said within seconds, not after the client's 30 s of retries.
   */
  def checkShareGroupsServed(): Unit = {
    admin // first: an unresolvable host is its own error
    BootstrapProbe.firstRefusal(options.bootstrapServers, ClusterAccess.ProbeTimeoutMs).foreach { refused =>
      throw ShareSourceErrors.brokerUnreachable(options.bootstrapServers, ClusterAccess.ProbeTimeoutMs, refused)
    }
    val level = shareVersion(await(admin.describeFeatures().featureMetadata()))
    if (level < 1) throw ShareSourceErrors.shareGroupsDisabled(
      options.bootstrapServers,
      new IllegalStateException(s"finalized feature share.version is $level")
    )
  }

  // Absent when the level is 0.
  private def shareVersion(features: FeatureMetadata): Int =
    Option(features.finalizedFeatures.get("share.version")).map(_.maxVersionLevel.toInt).getOrElse(0)

  /**
   * What the cluster offers beyond Kafka 4.1's share groups, and why not where it does not
   * ([[BrokerFeatures]]). Group settings that cannot be read (no DescribeConfigs permission) count as unset.
   */
  def features(): BrokerFeatures = {
    val metadata           = await(admin.describeFeatures().featureMetadata())
    val maxMetadataVersion = Option(metadata.supportedFeatures.get("metadata.version")).map(_.maxVersion.toInt).getOrElse(0)
    val finalizedMetadataVersion =
      Option(metadata.finalizedFeatures.get("metadata.version")).map(_.maxVersionLevel.toInt).getOrElse(0)
    val group =
      try Some(groupSettings())
      catch {
        case NonFatal(e) =>
          logInfo(s"kafka-share: cannot read the share group's settings (${e.getMessage}); taking the broker's defaults")
          None
      }
    BrokerFeatures.of(maxMetadataVersion, finalizedMetadataVersion, shareVersion(metadata), group)
  }

  override def resolveTopics(): Seq[String] = {
    val existing = await(admin.listTopics().names()).asScala.toSet
    options.subscription match {
      case Subscription.Topics(names) =>
        val missing = names.filterNot(existing)
        if (missing.nonEmpty) throw ShareSourceErrors.missingTopics(missing, options.bootstrapServers)
        names
      case p: Subscription.TopicPattern =>
        existing.filter(t => p.pattern.matcher(t).matches()).toSeq.sorted
    }
  }

  override def topicsNow(topics: Seq[String]): TopicsNow =
    if (topics.isEmpty) TopicsNow(Map.empty, Map.empty)
    else {
      val described = await(admin.describeTopics(topics.asJava).allTopicNames()).asScala
      val request = described.flatMap { case (t, d) =>
        d.partitions.asScala.map(p => new TopicPartition(t, p.partition) -> OffsetSpec.latest())
      }.toMap
      val ends = await(admin.listOffsets(request.asJava).all()).asScala.map { case (tp, info) =>
        (tp.topic, tp.partition) -> info.offset
      }.toMap
      TopicsNow(ends, described.map { case (t, d) => t -> d.topicId.toString }.toMap)
    }

  override def topicIds(topics: Seq[String]): Map[String, String] =
    await(admin.describeTopics(topics.asJava).allTopicNames()).asScala.map { case (t, d) => t -> d.topicId.toString }.toMap

  override def clusterId(): String = await(admin.describeCluster().clusterId())

  /**
   * The group's start offset per partition: every record below it is acknowledged for good.
   * It trails the acknowledgements (docs/internals/kafka-facts.md), which is safe for pruning. Empty when the
   * group has no state yet.
   */
  def groupStartOffsets(): Map[(String, Int), Long] = groupOffsets().map { case (tp, o) => tp -> o.start }

  /**
   * The group's start offset per partition, with the lag the broker computes for it where the broker
   * reports one (KIP-1226, Kafka 4.2 and later; None from 4.1 brokers). Empty when the group has no state yet.
   */
  override def groupOffsets(): Map[(String, Int), GroupPartitionOffset] =
    try {
      await(admin.listShareGroupOffsets(Map(options.groupId -> new ListShareGroupOffsetsSpec()).asJava)
        .partitionsToOffsetInfo(options.groupId)).asScala.collect {
        case (tp, o) if o != null =>
          (tp.topic, tp.partition) -> GroupPartitionOffset(o.startOffset, o.lag.toScala.map(_.longValue))
      }.toMap
    } catch { case _: GroupIdNotFoundException => Map.empty }

  /**
   * Applies `startingOffsets` as the group config share.auto.offset.reset, but only while the group
   * has no state: the group is shared, and changing it under other members would change what they read.
   */
  def applyStartingOffsets(starting: StartingOffsets): Unit = {
    val resource = new ConfigResource(ConfigResource.Type.GROUP, options.groupId)
    if (groupStartOffsets().nonEmpty) {
      logInfo(s"share group '${options.groupId}' already has state; startingOffsets=${starting.groupValue} " +
        "is not applied (the group continues where it is)")
    } else {
      val op = new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", starting.groupValue), AlterConfigOp.OpType.SET)
      await(
        admin.incrementalAlterConfigs(Map(resource -> (Collections.singletonList(op): java.util.Collection[AlterConfigOp])).asJava).all()
      )
      logInfo(s"share group '${options.groupId}' has no state yet: set its share.auto.offset.reset to " +
        s"${starting.groupValue} (option startingOffsets)")
    }
  }

  /**
   * Points the group's dead letters at `topic` (the broker's dead-letter queue, KIP-1191), after checking
   * that the cluster has it and that the topic takes them; refuses with a catalogued error otherwise.
   * The group config is shared by every member of the group: set only when it names another topic.
   */
  def useBrokerDeadLetters(topic: String, features: BrokerFeatures): Unit = {
    if (!features.brokerDeadLetters.available)
      throw ShareSourceErrors.brokerDeadLettersUnavailable(options.bootstrapServers, features.brokerDeadLetters.why)
    // The broker takes as a group's dead-letter topic only names with its prefix ("dlq." by default), and
    // sends nothing, silently, to another.
    brokerSetting("errors.deadletterqueue.topic.name.prefix").filterNot(topic.startsWith).foreach { prefix =>
      throw ShareSourceErrors.brokerDeadLetterTopicPrefix(topic, prefix)
    }
    val topicResource = new ConfigResource(ConfigResource.Type.TOPIC, topic)
    val enabled =
      try settings(topicResource).get("errors.deadletterqueue.group.enable").exists(_.equalsIgnoreCase("true"))
      catch { case _: UnknownTopicOrPartitionException => false }
    if (!enabled) throw ShareSourceErrors.brokerDeadLetterTopicNotEnabled(topic, options.bootstrapServers)
    val wanted = Map("errors.deadletterqueue.topic.name" -> topic, "errors.deadletterqueue.copy.record.enable" -> "true")
    val group  = groupSettings()
    val change = wanted.filterNot { case (k, v) => group.get(k).contains(v) }
    if (change.nonEmpty) {
      val ops: java.util.Collection[AlterConfigOp] =
        change.map { case (k, v) => new AlterConfigOp(new ConfigEntry(k, v), AlterConfigOp.OpType.SET) }.toSeq.asJava
      await(admin.incrementalAlterConfigs(Map(new ConfigResource(ConfigResource.Type.GROUP, options.groupId) -> ops).asJava).all())
      logInfo(s"kafka-share: share group '${options.groupId}' sends its dead letters to '$topic' (the broker's dead-letter " +
        s"queue; option ${OptionDeclarations.BrokerDeadLetters})")
    }
  }

  /** The group's share.record.lock.duration.ms (the broker default when the group does not set it). */
  def lockDurationMs(): Long =
    groupSettings().get("share.record.lock.duration.ms").flatMap(_.toLongOption).getOrElse(ClusterAccess.DefaultLockDurationMs)

  /**
   * How many times the broker delivers a record of this group before it archives it, if a record
   * that comes back to the group after that many deliveries is lost: the group's
   * share.delivery.count.limit (Kafka 4.3 and later), else the broker's group.share.delivery.count.limit,
   * else Kafka's default. None when no record is lost that way, because the group has a dead-letter
   * topic (errors.deadletterqueue.topic.name, where the broker copies such records), or when the
   * settings cannot be read: then no record is treated as being on its last attempt.
   */
  override def deliveryCountLimit(): Option[Int] =
    try {
      val group = groupSettings()
      if (group.get("errors.deadletterqueue.topic.name").exists(_.nonEmpty)) None
      else group.get("share.delivery.count.limit").flatMap(_.toIntOption)
        .orElse(brokerSetting("group.share.delivery.count.limit").flatMap(_.toIntOption))
        .orElse(Some(ClusterAccess.DefaultDeliveryCountLimit))
    } catch {
      case NonFatal(e) =>
        logInfo(s"kafka-share: cannot read the share group's delivery count limit (${e.getMessage}); records on " +
          "their last delivery attempt are neither told apart nor counted")
        None
    }

  /**
   * How many records of one partition the group may hold acquired and unacknowledged at once: the
   * group's share.partition.max.record.locks (Kafka 4.3 and later), else the broker's
   * group.share.partition.max.record.locks, else Kafka's default. It bounds the batches of the strategies
   * that hold records until the commit. None when the settings cannot be read.
   */
  def recordLockLimit(): Option[Int] =
    try
      groupSettings().get("share.partition.max.record.locks").flatMap(_.toIntOption)
        .orElse(brokerSetting("group.share.partition.max.record.locks").flatMap(_.toIntOption))
        .orElse(Some(ClusterAccess.DefaultRecordLockLimit))
    catch {
      case NonFatal(e) =>
        logInfo(s"kafka-share: cannot read the share group's record lock limit (${e.getMessage})")
        None
    }

  /** The share group's own settings (those it sets, and the broker's defaults for the others). */
  private def groupSettings(): Map[String, String] = settings(new ConfigResource(ConfigResource.Type.GROUP, options.groupId))

  /** A setting of the broker the client reaches first (the settings in question are cluster-wide). */
  private def brokerSetting(name: String): Option[String] =
    await(admin.describeCluster().nodes()).asScala.headOption.flatMap { node =>
      settings(new ConfigResource(ConfigResource.Type.BROKER, node.idString)).get(name)
    }

  private def settings(resource: ConfigResource): Map[String, String] =
    Option(await(admin.describeConfigs(Collections.singleton(resource)).all()).get(resource))
      .fold(Map.empty[String, String])(_.entries.asScala.collect { case e if e.value != null => e.name -> e.value }.toMap)

  /**
   * The most members a share group may have (broker setting group.share.max.size), or None when the
   * client may not read broker settings: then the broker's own refusal is what the user sees.
   */
  def groupMaxSize(): Option[Int] =
    try brokerSetting("group.share.max.size").flatMap(_.toIntOption)
    catch {
      case e: ShareSourceException =>
        logInfo(s"kafka-share: cannot read the broker's group.share.max.size (${e.getMessage}); parallelism is not checked against it")
        None
    }

  // The Admin client gives up after timeoutMs with its own TimeoutException ("Timed out waiting for
  // a node assignment"); the wait here is a little longer so that it is the one to tell. Both mean
  // that no broker answered.
  private def await[T](future: KafkaFuture[T]): T =
    try future.get(timeoutMs + 5000L, TimeUnit.MILLISECONDS)
    catch {
      case e: ExecutionException => e.getCause match {
          case t: org.apache.kafka.common.errors.TimeoutException =>
            throw ShareSourceErrors.brokerUnreachable(options.bootstrapServers, timeoutMs, t)
          case a: AuthenticationException => throw ShareSourceErrors.authenticationFailed(options.bootstrapServers, a)
          case a: AuthorizationException  => throw ShareSourceErrors.notAuthorized(options.bootstrapServers, options.groupId, a)
          case cause                      => throw cause
        }
      case e: TimeoutException => throw ShareSourceErrors.brokerUnreachable(options.bootstrapServers, timeoutMs, e)
    }

  // Made at the first backlog whose age is asked for; not a member of any group. Under timestampsLock: real
  // time reads them on its look-ahead's thread, and the consumer is not thread-safe.
  private val timestampsLock = new Object
  private var timestamps     = Option.empty[(KafkaConsumer[Array[Byte], Array[Byte]], RecordTimestamps)]
  private var closed         = false

  override def recordTimestamps(offsets: Map[(String, Int), Long]): Map[(String, Int), Long] = timestampsLock.synchronized {
    if (closed) Map.empty else readTimestamps(offsets)
  }

  private def readTimestamps(offsets: Map[(String, Int), Long]): Map[(String, Int), Long] = {
    val (_, reader) = timestamps.getOrElse {
      val props = new Properties
      // A plain consumer refuses the share consumer's own settings, as in ReplayFetcher.
      options.kafkaParams.foreach { case (k, v) => if (!k.startsWith("share.")) props.put(k, v) }
      Seq(ConsumerConfig.GROUP_ID_CONFIG, ConsumerConfig.GROUP_PROTOCOL_CONFIG, ConsumerConfig.GROUP_INSTANCE_ID_CONFIG).foreach(
        props.remove
      )
      props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false")
      props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest")      // a start offset the log no longer has: its first record
      props.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, "65536") // one record is wanted; a batch comes anyway
      props.put(ConsumerConfig.FETCH_MAX_BYTES_CONFIG, "1048576")
      props.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000")
      val consumer = new KafkaConsumer[Array[Byte], Array[Byte]](props, new ByteArrayDeserializer, new ByteArrayDeserializer)
      val made     = (consumer, new RecordTimestamps(consumer, ClusterAccess.TimestampBudgetMs))
      timestamps = Some(made)
      made
    }
    reader.at(offsets)
  }

  override def close(): Unit =
    try timestampsLock.synchronized {
        closed = true
        timestamps.foreach(_._1.close(CloseOptions.timeout(java.time.Duration.ofSeconds(5))))
      }
    finally admin.close(java.time.Duration.ofSeconds(5))
}

/** A partition's start offset in the share group, and the broker's lag for it where it reports one (4.2+). */
final case class GroupPartitionOffset(start: Long, brokerLag: Option[Long])

/** What the cluster says of the subscribed topics now: end offsets per partition, and the topics' ids. */
final case class TopicsNow(ends: Map[(String, Int), Long], ids: Map[String, String])

object ClusterAccess {

  /** How long the driver waits for the cluster before it gives up with a clear error. */
  val TimeoutMs                 = 30000L
  val ProbeTimeoutMs            = 8000L
  val DefaultLockDurationMs     = 30000L
  val DefaultDeliveryCountLimit = 5
  val DefaultRecordLockLimit    = 2000

  /** How long a batch's planning may spend reading the oldest records' timestamps (backlogAgeMs). */
  val TimestampBudgetMs = 1000L
}
