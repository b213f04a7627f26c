package io.github.kafkashare.spark.ack

import java.util.concurrent.atomic.AtomicLong
import java.util.concurrent.{ConcurrentHashMap, ConcurrentLinkedQueue, Executors, ThreadFactory, TimeUnit}

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import io.github.kafkashare.spark.consumer.{PooledShareConsumer, ShareConsumerPool}
import io.github.kafkashare.spark.offsets.SerializableHadoopConf
import org.apache.hadoop.fs.{FileContext, Path}
import org.apache.spark.internal.Logging

/**
 * Phase 2 of the two-phase-commit strategy, on the executor that holds the records.
 *
 * A read task pins its records (phase 1, the acquisition log) and hands its consumer, still holding
 * them, to this watcher. The watcher checks Spark's commit log: once `commits/<batch>` exists the
 * sink has the batch, and the consumer ACCEPTs and goes back to the pool. It does not wait for the
 * next batch, which an idle stream or a stop may never bring.
 *
 * If the commit does not come before the locks near their end, the watcher ACCEPTs anyway: the
 * records are pinned, so the batch replays them from the topic whenever it runs again; letting the
 * locks expire instead would hand them to other members of the group, which would process them a
 * second time.
 */
object CommitWatcher extends Logging {

  private final case class Hold(consumer: PooledShareConsumer, commitFile: Path, conf: SerializableHadoopConf, deadlineNanos: Long)

  private val holds = new ConcurrentLinkedQueue[Hold]()

  /** Records ACCEPTed here per share group, not yet reported by a read task. */
  private val acceptedCounts = new ConcurrentHashMap[String, AtomicLong]()

  private val timer = Executors.newSingleThreadScheduledExecutor(new ThreadFactory {
    override def newThread(r: Runnable): Thread = {
      val t = new Thread(r, "kafka-share-commit-watcher"); t.setDaemon(true); t
    }
  })
  timer.scheduleWithFixedDelay(() => check(), 100, 100, TimeUnit.MILLISECONDS)

  /** Holds `consumer` (with its acquired records) until `commitFile` exists or `maxHoldMs` passes. */
  def holdUntilCommitted(consumer: PooledShareConsumer, commitFile: Path, conf: SerializableHadoopConf, maxHoldMs: Long): Unit =
    holds.add(Hold(consumer, commitFile, conf, System.nanoTime + TimeUnit.MILLISECONDS.toNanos(maxHoldMs)))

  /** Takes the count of records this JVM ACCEPTed for `groupId` since the last call. */
  def takeAcceptedCount(groupId: String): Long =
    Option(acceptedCounts.get(groupId)).map(_.getAndSet(0)).getOrElse(0L)

  /** Batches held now, for tests and metrics. */
  def holding: Int = holds.size

  private def check(): Unit = holds.asScala.toList.foreach { hold =>
    try {
      val committed = FileContext.getFileContext(hold.commitFile.toUri, hold.conf.value).util.exists(hold.commitFile)
      val late      = System.nanoTime > hold.deadlineNanos
      if (committed || late) {
        holds.remove(hold)
        if (late && !committed)
          logWarning(s"batch commit ${hold.commitFile} did not come within the lock duration; accepting the pinned records " +
            "now (the batch replays them if it runs again). Raise the group's share.record.lock.duration.ms or shorten batches.")
        acceptAll(hold.consumer)
      }
    } catch {
      case NonFatal(e) => logWarning(s"checking ${hold.commitFile} failed; will retry", e)
    }
  }

  private def acceptAll(consumer: PooledShareConsumer): Unit =
    try {
      val count = consumer.holding
      consumer.acceptHeld()
      acceptedCounts.computeIfAbsent(consumer.key.groupId, _ => new AtomicLong).addAndGet(count)
      ShareConsumerPool.giveBack(consumer)
    } catch {
      case NonFatal(e) =>
        // The records are pinned: if the broker did not take the ACCEPT, their redelivery is dropped by dedup.
        logWarning("accepting a committed batch failed; its records will be redelivered and dropped as duplicates", e)
        ShareConsumerPool.discard(consumer)
    }
}
