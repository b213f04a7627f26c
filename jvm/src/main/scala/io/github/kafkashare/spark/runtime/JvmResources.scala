package io.github.kafkashare.spark.runtime

import java.time.Duration
import java.util.concurrent.{ConcurrentHashMap, Executors, TimeUnit}

import scala.util.control.NonFatal

import io.github.kafkashare.spark.ack.CommitWatcher
import io.github.kafkashare.spark.consumer.{Clock, PooledShareConsumer, ShareConsumerPool}
import org.apache.hadoop.util.ShutdownHookManager
import org.apache.kafka.clients.producer.Producer
import org.apache.spark.internal.Logging

/**
 * What the connector keeps once per JVM (an executor's, and the driver's where it runs read tasks too),
 * all of it here:
 *  - the share consumer pool, and its evictor thread (a round every second, [[ShareConsumerPool]]);
 *  - the commit watcher, and its thread (a round every 100 ms, [[CommitWatcher]]);
 *  - the dead-letter producers, one per client settings (option kafka.share.deadLetterTopic).
 *
 * Lifecycle. Each is created on first use: a JVM that never reads from a share group starts nothing.
 * The threads are daemons. A shutdown hook, registered with the first consumer pool or producer, runs
 * at the JVM's exit after Spark's own hooks and before Hadoop closes its file systems, within
 * [[ExitHookTimeoutSeconds]]: the watcher ends every hold (acknowledged as at a stop, consumers closed),
 * the pool closes its idle consumers and those that read tasks give back within
 * [[WaitForLentMs]], and the producers close after sending what they have. Every closed consumer leaves
 * its group at once, so no member of a stopped application lingers until its session expires. What
 * belongs to one query is forgotten when it stops: within a second of its `stopped` marker, the
 * evictor closes its idle consumers and drops its entries once nothing of it is idle or held; the
 * watcher ends its holds. Driver-only state (the explicit-mode queries of
 * [[io.github.kafkashare.spark.ack.ExplicitQueries]]) lives and ends with each query.
 */
object JvmResources extends TaskRuntime with Logging {

  // Below Spark's own hooks (40: they stop the SparkContext, so no task starts after this runs) and above
  // FileSystem's (10: the watcher reads the checkpoint).
  private val ExitHookPriority       = 30
  private val ExitHookTimeoutSeconds = 20L
  private val WaitForLentMs          = 3000L

  @volatile private var pool: ShareConsumerPool = null
  @volatile private var watcher: CommitWatcher  = null
  private val producers                         = new ConcurrentHashMap[Map[String, String], Producer[Array[Byte], Array[Byte]]]()
  private var hooked                            = false

  /** This JVM's consumer pool, its evictor started on first use. */
  def consumerPool: ShareConsumerPool = {
    if (pool == null) synchronized {
      if (pool == null) {
        val created = new ShareConsumerPool(Clock.System, new PooledShareConsumer(_))
        every(1000, "kafka-share-consumer-evictor")(created.evictIdle())
        closeAtExit()
        pool = created
      }
    }
    pool
  }

  /** The pool, if a read task ever started it: a stop on a driver that ran none has nothing to close. */
  def consumerPoolIfStarted: Option[ShareConsumerPool] = Option(pool)

  /** This JVM's commit watcher, its thread started by the first hold. */
  def commitWatcher: CommitWatcher = {
    if (watcher == null) synchronized {
      if (watcher == null) {
        val created = new CommitWatcher(Clock.System, consumerPool)
        every(100, "kafka-share-commit-watcher")(created.checkHolds())
        watcher = created
      }
    }
    watcher
  }

  /** The watcher if a hold ever started it. */
  def commitWatcherIfStarted: Option[CommitWatcher] = Option(watcher)

  def deadLetterProducer(
      params: Map[String, String],
      make: Map[String, String] => Producer[Array[Byte], Array[Byte]]
  ): Producer[Array[Byte], Array[Byte]] = {
    closeAtExit()
    producers.computeIfAbsent(params, p => make(p))
  }

  private def closeAtExit(): Unit = synchronized {
    if (!hooked) {
      // Hadoop's hook manager, as Spark's own hooks use: ordered before FileSystem's hook, and bounded.
      ShutdownHookManager.get.addShutdownHook(() => closeAll(), ExitHookPriority, ExitHookTimeoutSeconds, TimeUnit.SECONDS)
      hooked = true
    }
  }

  private def closeAll(): Unit = {
    try Option(watcher).foreach(_.endAll())
    catch { case NonFatal(e) => logWarning("kafka-share: ending the commit watcher's holds at exit failed", e) }
    try Option(pool).foreach(_.closeAll(WaitForLentMs))
    catch { case NonFatal(e) => logWarning("kafka-share: closing the share consumers at exit failed", e) }
    producers.values.forEach { p =>
      try p.close(Duration.ofSeconds(5))
      catch { case NonFatal(e) => logWarning("closing a dead-letter producer failed", e) }
    }
    producers.clear()
  }

  private def every(periodMs: Long, name: String)(round: => Unit): Unit = {
    val timer = Executors.newSingleThreadScheduledExecutor { r =>
      val t = new Thread(r, name); t.setDaemon(true); t
    }
    // A round that fails is said and the next one runs: a scheduled task that throws is never run again.
    val safely: Runnable = () =>
      try round
      catch { case NonFatal(e) => logWarning(s"$name: a round failed; the next one runs as usual", e) }
    timer.scheduleWithFixedDelay(safely, periodMs, periodMs, TimeUnit.MILLISECONDS)
  }
}
