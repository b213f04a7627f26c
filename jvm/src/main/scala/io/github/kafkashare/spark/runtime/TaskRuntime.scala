package io.github.kafkashare.spark.runtime

import io.github.kafkashare.spark.ack.CommitWatcher
import io.github.kafkashare.spark.consumer.ShareConsumerPool
import org.apache.kafka.clients.producer.Producer

/**
 * What a read task uses of the JVM it runs in, given to it by the reader factory, never reached for:
 * the consumer pool (borrow, give back), the commit watcher (hold until the batch commits), and the
 * dead-letter producers. [[JvmResources]] is the one production implementation; a test gives its own
 * pool and watcher, on Kafka's MockShareConsumer.
 */
trait TaskRuntime {

  /** The share consumers a task borrows and gives back. */
  def consumerPool: ShareConsumerPool

  /** Where a held batch's consumer waits for the batch's commit (started by the first hold). */
  def commitWatcher: CommitWatcher

  /** The watcher, if a hold ever started it: what it acknowledged is read without starting one. */
  def commitWatcherIfStarted: Option[CommitWatcher]

  /** The producer of dead letters for these client settings, made by `make` the first time. */
  def deadLetterProducer(
      params: Map[String, String],
      make: Map[String, String] => Producer[Array[Byte], Array[Byte]]
  ): Producer[Array[Byte], Array[Byte]]
}
