package io.github.kafkashare.spark.metrics

import org.apache.spark.sql.connector.metric.{CustomMetric, CustomSumMetric, CustomTaskMetric}

/** The source's SQL UI metrics: one per counter the read tasks keep. Spark instantiates them by class name. */
class RecordsAcquiredMetric extends CustomSumMetric {
  override def name: String        = ShareSourceMetrics.Acquired
  override def description: String = "records acquired from the share group"
}
class RecordsAcceptedMetric extends CustomSumMetric {
  override def name: String        = ShareSourceMetrics.Accepted
  override def description: String = "records ACCEPTed"
}
class RecordsReleasedMetric extends CustomSumMetric {
  override def name: String        = ShareSourceMetrics.Released
  override def description: String = "records RELEASEd (not pinned: a failed, lost or limited read)"
}
class RecordsReplayedMetric extends CustomSumMetric {
  override def name: String        = ShareSourceMetrics.Replayed
  override def description: String = "records re-read from the acquisition log (retries, re-runs, second actions)"
}
class RedeliveriesDroppedMetric extends CustomSumMetric {
  override def name: String        = ShareSourceMetrics.Dropped
  override def description: String = "redeliveries of pinned records dropped (exactly-once strategies)"
}

/** The largest value of a task metric (delivery count, share of the lock used). */
abstract class CustomMaxMetric extends CustomMetric {
  override def aggregateTaskMetrics(values: Array[Long]): String = if (values.isEmpty) "0" else values.max.toString
}
class MaxDeliveryCountMetric extends CustomMaxMetric {
  override def name: String        = ShareSourceMetrics.MaxDeliveryCount
  override def description: String = "highest delivery count seen"
}
class LockUsedPercentMetric extends CustomMaxMetric {
  override def name: String        = ShareSourceMetrics.LockUsedPercent
  override def description: String = "share of the lock duration the slowest task held records (%)"
}

object ShareSourceMetrics {
  val Acquired         = "recordsAcquired"
  val Accepted         = "recordsAccepted"
  val Released         = "recordsReleased"
  val Replayed         = "recordsReplayed"
  val Dropped          = "redeliveriesDropped"
  val MaxDeliveryCount = "maxDeliveryCount"
  val LockUsedPercent  = "lockUsedPercent"

  val supported: Array[CustomMetric] = Array(
    new RecordsAcquiredMetric, new RecordsAcceptedMetric, new RecordsReleasedMetric, new RecordsReplayedMetric,
    new RedeliveriesDroppedMetric, new MaxDeliveryCountMetric, new LockUsedPercentMetric)

  def taskMetric(metricName: String, metricValue: Long): CustomTaskMetric = new CustomTaskMetric {
    override def name(): String = metricName
    override def value(): Long  = metricValue
  }
}

/** Counters of one read task. */
final class TaskCounters {
  var acquired, accepted, released, replayed, dropped, maxDeliveryCount, lockUsedPercent = 0L

  def toTaskMetrics: Array[CustomTaskMetric] = {
    import ShareSourceMetrics._
    Array(taskMetric(Acquired, acquired), taskMetric(Accepted, accepted), taskMetric(Released, released),
      taskMetric(Replayed, replayed), taskMetric(Dropped, dropped), taskMetric(MaxDeliveryCount, maxDeliveryCount),
      taskMetric(LockUsedPercent, lockUsedPercent))
  }
}
