package io.github.kafkashare.spark.planning

import io.github.kafkashare.spark.ack.ExplicitQueries
import io.github.kafkashare.spark.errors.ShareSourceErrors
import io.github.kafkashare.spark.metrics.QueryTotals
import io.github.kafkashare.spark.offsets.{AcquisitionLog, DecisionLog, SerializableHadoopConf}
import io.github.kafkashare.spark.offsets.store.CheckpointStore
import io.github.kafkashare.spark.options.{AcknowledgmentMode, LockBudget, OptionDeclarations, ShareSourceOptions}
import io.github.kafkashare.spark.sparkinternals.{QuerySink, RealTimeMode, SparkConfs, TaskSlots}
import org.apache.hadoop.fs.Path
import org.apache.spark.internal.Logging
import org.apache.spark.sql.SparkSession

/**
 * A query's start, on the driver: checks the cluster (share groups served, topics there, parallelism
 * within the group's size), prepares the group (starting offsets, the broker's dead letters), chooses
 * the consumers' settings, says once what the cluster lacks, and builds the stream.
 */
object StreamStart extends Logging {

  def apply(options: ShareSourceOptions, checkpointDir: String, spark: SparkSession): KafkaShareMicroBatchStream = {
    val cluster = new ClusterAccess(options)
    try {
      cluster.checkShareGroupsServed()
      val topics = cluster.resolveTopics() // fails clearly on a missing topic, before anything else
      options.startingOffsets.foreach(cluster.applyStartingOffsets)
      val lockDurationMs = options.lockTimeoutMs.getOrElse(cluster.lockDurationMs())
      val features       = cluster.features()
      val partitions     = cluster.topicsNow(topics).ends.size
      options.brokerDeadLetterTopic.foreach(cluster.useBrokerDeadLetters(_, features)) // before the limit: none is lost at it then
      val deliveryLimit = cluster.deliveryCountLimit()
      val lockLimit     = cluster.recordLockLimit()
      // With auto, the most a batch gets: the group, the clients and real time are sized for it.
      val parallelism = options.parallelism.getOrElse(options.elastic.fold(spark.sparkContext.defaultParallelism) { bounds =>
        bounds.max.getOrElse(TaskSlots.of(spark).getOrElse(spark.sparkContext.defaultParallelism)).max(bounds.min)
      })
      // Each read task is a member of the group; the group takes at most group.share.max.size.
      cluster.groupMaxSize().filter(parallelism > _).foreach { max =>
        val option = if (options.elastic.nonEmpty) OptionDeclarations.MaxParallelism else OptionDeclarations.Parallelism
        throw ShareSourceErrors.parallelismAboveGroupSize(option, parallelism, max, options.groupId)
      }
      val hadoopConf = hadoopConfOf(spark)
      val store      = CheckpointStore.of(new Path(checkpointDir), hadoopConf.value)
      if (!store.createIfAbsentAtomic) logWarning(ShareSourceErrors.checkpointStoreNotAtomic(checkpointDir, store.createIfAbsentBy))
      RecordedMode.check(store, checkpointDir, options.mode)
      logInfo(s"kafka-share: group '${options.groupId}', ${KafkaShareTable.describe(options.subscription)}, " +
        s"strategy ${options.strategy.name}, ${consumersPerBatch(options, parallelism)} per batch, lock duration $lockDurationMs ms, " +
        s"checkpoint logs written by ${store.createIfAbsentBy}, " +
        s"delivery count limit ${deliveryLimit.getOrElse("- (none that loses records)")}, " +
        s"record lock limit ${lockLimit.fold("- (unreadable)")(l => s"$l per partition")}" +
        options.poison.fold("")(p =>
          s", records delivered more than ${p.maxDeliveries} times rejected" +
            p.deadLetterTopic.fold("")(t => s" via '$t'")
        ))
      logInfo(s"kafka-share: group '${options.groupId}': ${features.describe}")
      val clientSettings = chooseClientSettings(options, parallelism, partitions, lockLimit, features)
      if (options.holdsUntilCommit && !features.renew.available) warnLocksNotRenewed(options, features, lockDurationMs)
      val explicit = registerExplicitMode(options, checkpointDir, hadoopConf, spark)
      try newStream(
          options,
          checkpointDir,
          cluster,
          StreamSettings(parallelism, lockDurationMs, deliveryLimit, features, clientSettings),
          hadoopConf,
          QueryTotals(spark.sparkContext),
          explicit
        )
      catch { case e: Throwable => explicit.foreach(ExplicitQueries.unregister); throw e }
    } catch {
      case e: Throwable => cluster.close(); throw e
    }
  }

  private def consumersPerBatch(options: ShareSourceOptions, parallelism: Int): String = options.elastic.fold(s"$parallelism consumers") {
    bounds => s"${bounds.min} to $parallelism consumers (auto: the backlog drained within ${bounds.drainMs} ms)"
  }

  /** The checkpoint's Hadoop configuration, for the driver and, once per executor, for the read tasks. */
  private[planning] def hadoopConfOf(spark: SparkSession): SerializableHadoopConf =
    SerializableHadoopConf.broadcast(SparkConfs.checkpointConf(spark), spark.sparkContext)

  /** The stream, with Spark's real-time interfaces where this Spark has them: real time is Spark's choice, by trigger. */
  private def newStream(
      options: ShareSourceOptions,
      checkpointDir: String,
      cluster: ClusterView,
      settings: StreamSettings,
      hadoopConf: SerializableHadoopConf,
      totals: QueryTotals,
      explicit: Option[ExplicitQueries.Registration]
  ): KafkaShareMicroBatchStream = RealTimeMode.streamConstructor match {
    case Some(constructor) =>
      try constructor.newInstance(options, checkpointDir, cluster, settings, hadoopConf, totals, explicit).asInstanceOf[
          KafkaShareMicroBatchStream
        ]
      catch { case e: java.lang.reflect.InvocationTargetException => throw e.getCause }
    case None => new KafkaShareMicroBatchStream(options, checkpointDir, cluster, settings, hadoopConf, totals, explicit)
  }

  /** The consumers' settings for this cluster (ClientSettings); the start-up log names those the source chose. */
  private def chooseClientSettings(
      options: ShareSourceOptions,
      parallelism: Int,
      partitions: Int,
      lockLimit: Option[Int],
      features: BrokerFeatures
  ): Map[String, String] = {
    val settings =
      ClientSettings.of(options, parallelism, partitions, lockLimit, features.strictAcquisition.available, features.renew.available)
    val chosen = ClientSettings.Chosen.filter(k => settings.get(k) != options.kafkaParams.get(k))
    if (chosen.nonEmpty)
      logInfo(s"kafka-share: group '${options.groupId}': consumer settings chosen by the source: " +
        chosen.map(k => s"$k=${settings(k)}").mkString(", "))
    settings
  }

  private def warnLocksNotRenewed(options: ShareSourceOptions, features: BrokerFeatures, lockDurationMs: Long): Unit =
    logWarning(s"kafka-share: group '${options.groupId}': " +
      s"${if (options.mode == AcknowledgmentMode.Implicit) options.strategy.name else "explicit mode"} " +
      s"holds records until their batch commits and cannot renew their locks here (${features.renew.why}): a batch " +
      s"that takes longer than 80% of the lock duration ($lockDurationMs ms) has its records acknowledged before it " +
      "commits (docs/internals/delivery-semantics.md, 'Held records and the lock')")

  /** Explicit mode: only foreachBatch can decide; the query's logs are registered for its decisions. */
  private def registerExplicitMode(
      options: ShareSourceOptions,
      checkpointDir: String,
      hadoopConf: SerializableHadoopConf,
      spark: SparkSession
  ): Option[ExplicitQueries.Registration] = options.mode match {
    case AcknowledgmentMode.Implicit => None
    case AcknowledgmentMode.Explicit(_) =>
      if (QuerySink.isRealTime(spark)) throw ShareSourceErrors.realTimeHoldsRecords("kafka.share.acknowledgment.mode", "explicit")
      QuerySink.ofCurrentQuery(spark).filterNot(_ == QuerySink.ForeachBatch).foreach { sink =>
        throw ShareSourceErrors.explicitModeNeedsForeachBatch(sink)
      }
      val registration =
        new ExplicitQueries.Registration(
          options.groupId,
          new AcquisitionLog(checkpointDir, hadoopConf),
          new DecisionLog(checkpointDir, hadoopConf)
        )
      ExplicitQueries.register(registration)
      Some(registration)
  }
}

/** What the start learnt of the cluster and chose for the query's consumers. */
final case class StreamSettings(
    parallelism: Int,
    lockDurationMs: Long,
    initialDeliveryLimit: Option[Int],
    features: BrokerFeatures,
    clientSettings: Map[String, String]
) {
  def locks: LockBudget = LockBudget(lockDurationMs)
}
