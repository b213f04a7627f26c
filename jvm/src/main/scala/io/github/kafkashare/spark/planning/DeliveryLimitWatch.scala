package io.github.kafkashare.spark.planning

import io.github.kafkashare.spark.errors.ShareSourceErrors
import io.github.kafkashare.spark.metrics.{QueryTotals, ShareSourceMetrics}
import org.apache.spark.internal.Logging

/**
 * The group's delivery count limit, read again now and then (raising it is the advice the source gives,
 * and the broker applies a new value at once), and the driver's warning of records read on their last
 * delivery attempt.
 */
private[planning] final class DeliveryLimitWatch(cluster: ClusterView, initial: Option[Int], totals: QueryTotals) extends Logging {

  private var limit            = initial
  private var readAt           = System.nanoTime
  private var lastAttemptsSaid = 0L

  def current: Option[Int] = limit

  def refresh(): Unit =
    if (System.nanoTime - readAt > DeliveryLimitWatch.RereadNanos) {
      limit = cluster.deliveryCountLimit()
      readAt = System.nanoTime
    }

  /** Records read on their last delivery attempt since the last call: the driver log says it too. */
  def warnOfLastAttempts(): Unit = {
    val seen = totals(ShareSourceMetrics.AtLastDelivery).sum
    if (seen > lastAttemptsSaid)
      logWarning(s"kafka-share: ${seen - lastAttemptsSaid} record(s) were read on their last delivery attempt " +
        s"(the group's delivery count limit is ${limit.getOrElse("-")}): ${ShareSourceErrors.LastAttemptAdvice}. " +
        s"Metric: ${ShareSourceMetrics.AtLastDelivery.totalName}")
    lastAttemptsSaid = seen
  }
}

object DeliveryLimitWatch {

  /** How often group settings that may change while the query runs are read again. */
  val RereadNanos: Long = 60L * 1000 * 1000 * 1000
}
