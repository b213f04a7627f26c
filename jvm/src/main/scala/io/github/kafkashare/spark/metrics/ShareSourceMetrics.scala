package io.github.kafkashare.spark.metrics

import java.io.{ByteArrayInputStream, ByteArrayOutputStream, ObjectInputStream, ObjectOutputStream, ObjectStreamClass}

import org.apache.spark.sql.connector.metric.{CustomMetric, CustomSumMetric, CustomTaskMetric}
import org.apache.spark.util.LongAccumulator

/**
 * The source's SQL UI metrics, one per counter the read tasks keep. Spark instantiates them by class
 * name on the driver, so each is a class with no constructor arguments.
 */
abstract class ShareSumMetric(override val name: String, override val description: String) extends CustomSumMetric

/** The largest value over the tasks (delivery count, share of the lock used). */
abstract class ShareMaxMetric(override val name: String, override val description: String) extends CustomMetric {
  override def aggregateTaskMetrics(values: Array[Long]): String = if (values.isEmpty) "0" else values.max.toString
}

class RecordsAcquiredMetric extends ShareSumMetric(ShareSourceMetrics.Acquired, "records acquired from the share group")
class RecordsAcceptedMetric extends ShareSumMetric(ShareSourceMetrics.Accepted, "records ACCEPTed")
class RecordsReleasedMetric
    extends ShareSumMetric(ShareSourceMetrics.Released, "records RELEASEd (not pinned: a failed, lost or limited read)")
class RecordsReplayedMetric
    extends ShareSumMetric(ShareSourceMetrics.Replayed, "records re-read from the acquisition log (retries, re-runs, second actions)")
class RecordsRejectedMetric extends ShareSumMetric(ShareSourceMetrics.Rejected, "records REJECTed (poison records, explicit decisions)")
class RedeliveriesDroppedMetric
    extends ShareSumMetric(ShareSourceMetrics.Dropped, "redeliveries of pinned records dropped (exactly-once strategies)")
class MaxDeliveryCountMetric extends ShareMaxMetric(ShareSourceMetrics.MaxDeliveryCount, "highest delivery count seen")
class LastDeliveryMetric extends ShareSumMetric(
      ShareSourceMetrics.AtLastDelivery,
      "records acquired on their last delivery attempt (share.delivery.count.limit): one more failure and the broker archives them"
    )
class ConsumersCreatedMetric
    extends ShareSumMetric(ShareSourceMetrics.ConsumersCreated, "share consumers created (0 in steady state: the pool reuses them)")
class LockUsedPercentMetric
    extends ShareMaxMetric(ShareSourceMetrics.LockUsedPercent, "share of the lock duration the slowest task held records (%)")

/** A driver metric (Scan.reportDriverMetrics): one value per batch, the backlog when it was planned. */
final class BacklogMetric
    extends ShareMaxMetric(
      ShareSourceMetrics.Backlog,
      "records available to the share group when the batch was planned (the broker's own lag from Kafka 4.2)"
    )

object ShareSourceMetrics {
  val Acquired         = "recordsAcquired"
  val Accepted         = "recordsAccepted"
  val Released         = "recordsReleased"
  val Replayed         = "recordsReplayed"
  val Dropped          = "redeliveriesDropped"
  val Rejected         = "recordsRejected"
  val MaxDeliveryCount = "maxDeliveryCount"
  val LockUsedPercent  = "lockUsedPercent"
  val ConsumersCreated = "consumersCreated"
  val AtLastDelivery   = "recordsAtLastDelivery"
  val Backlog          = "backlogRecords"

  val supported: Array[CustomMetric] = Array(
    new RecordsAcquiredMetric,
    new RecordsAcceptedMetric,
    new RecordsReleasedMetric,
    new RecordsReplayedMetric,
    new RecordsRejectedMetric,
    new RedeliveriesDroppedMetric,
    new MaxDeliveryCountMetric,
    new LockUsedPercentMetric,
    new ConsumersCreatedMetric,
    new LastDeliveryMetric,
    new BacklogMetric
  )

  def taskMetric(metricName: String, metricValue: Long): CustomTaskMetric = new CustomTaskMetric {
    override def name(): String = metricName
    override def value(): Long  = metricValue
  }
}

/**
 * Totals since the query started, for query progress: the read tasks add to these accumulators and
 * the driver reads them. A retried task counts again.
 */
final class QueryTotals(spark: org.apache.spark.SparkContext) extends Serializable {
  val acquired: LongAccumulator         = spark.longAccumulator("kafka-share records acquired")
  val accepted: LongAccumulator         = spark.longAccumulator("kafka-share records accepted")
  val released: LongAccumulator         = spark.longAccumulator("kafka-share records released")
  val replayed: LongAccumulator         = spark.longAccumulator("kafka-share records replayed")
  val dropped: LongAccumulator          = spark.longAccumulator("kafka-share redeliveries dropped")
  val rejected: LongAccumulator         = spark.longAccumulator("kafka-share records rejected")
  val consumersCreated: LongAccumulator = spark.longAccumulator("kafka-share consumers created")
  val atLastDelivery: LongAccumulator   = spark.longAccumulator("kafka-share records on their last delivery attempt")

  def asMetrics: Map[String, String] = {
    import ShareSourceMetrics._
    Map(
      s"${Acquired}Total"         -> acquired.sum,
      s"${Accepted}Total"         -> accepted.sum,
      s"${Released}Total"         -> released.sum,
      s"${Replayed}Total"         -> replayed.sum,
      s"${Dropped}Total"          -> dropped.sum,
      s"${Rejected}Total"         -> rejected.sum,
      s"${ConsumersCreated}Total" -> consumersCreated.sum,
      s"${AtLastDelivery}Total"   -> atLastDelivery.sum
    ).map { case (k, v) => k -> v.toString }
  }

  def inTransit: QueryTotalsInTransit = new QueryTotalsInTransit(this)
}

/**
 * The totals on their way to the read tasks. An accumulator counts for a task only if it is
 * deserialized while the task runs, but Spark deserializes input partitions before the task starts;
 * so the totals travel as bytes inside the partition and the reader opens them.
 */
final class QueryTotalsInTransit(totals: QueryTotals) extends Serializable {
  private val bytes: Array[Byte] = {
    val buffer = new ByteArrayOutputStream
    val out    = new ObjectOutputStream(buffer)
    try out.writeObject(totals)
    finally out.close()
    buffer.toByteArray
  }

  /** Call inside the task. */
  def open(): QueryTotals = {
    val in = new ObjectInputStream(new ByteArrayInputStream(bytes)) {
      override def resolveClass(desc: ObjectStreamClass): Class[_] =
        Class.forName(desc.getName, false, Thread.currentThread.getContextClassLoader)
    }
    try in.readObject().asInstanceOf[QueryTotals]
    finally in.close()
  }
}

/** Counters of one read task. */
final class TaskCounters {
  var acquired, accepted, released, replayed, dropped, rejected, maxDeliveryCount, lockUsedPercent, consumersCreated, atLastDelivery = 0L

  /** Adds this task's counts to the query totals, once, when the task's reader closes. */
  def addTo(totals: QueryTotals): Unit = {
    totals.acquired.add(acquired); totals.accepted.add(accepted); totals.released.add(released)
    totals.replayed.add(replayed); totals.dropped.add(dropped); totals.rejected.add(rejected)
    totals.consumersCreated.add(consumersCreated); totals.atLastDelivery.add(atLastDelivery)
  }

  def toTaskMetrics: Array[CustomTaskMetric] = {
    import ShareSourceMetrics._
    Array(
      taskMetric(Acquired, acquired),
      taskMetric(Accepted, accepted),
      taskMetric(Released, released),
      taskMetric(Replayed, replayed),
      taskMetric(Rejected, rejected),
      taskMetric(Dropped, dropped),
      taskMetric(MaxDeliveryCount, maxDeliveryCount),
      taskMetric(LockUsedPercent, lockUsedPercent),
      taskMetric(ConsumersCreated, consumersCreated),
      taskMetric(AtLastDelivery, atLastDelivery)
    )
  }
}
