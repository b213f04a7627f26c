package io.github.kafkashare.spark.metrics

import java.io.{ByteArrayInputStream, ByteArrayOutputStream, ObjectInputStream, ObjectOutputStream, ObjectStreamClass}

import org.apache.spark.sql.connector.metric.{CustomMetric, CustomSumMetric, CustomTaskMetric}
import org.apache.spark.util.LongAccumulator

/**
 * A SQL UI metric summed over the tasks. Spark keeps the class name and, to aggregate, creates the
 * class again through its no-argument constructor and calls only `aggregateTaskMetrics`: so one class
 * per way of aggregating is enough, and the name and description come from the declaration.
 */
class SumOverTasks(metricName: String, metricDescription: String) extends CustomSumMetric {
  def this() = this("", "")
  override def name(): String        = metricName
  override def description(): String = metricDescription
}

/** A SQL UI metric that shows the largest value over the tasks (delivery count, share of the lock used). */
class MaxOverTasks(metricName: String, metricDescription: String) extends CustomMetric {
  def this() = this("", "")
  override def name(): String                                    = metricName
  override def description(): String                             = metricDescription
  override def aggregateTaskMetrics(values: Array[Long]): String = if (values.isEmpty) "0" else values.max.toString
}

/**
 * One metric of the source, declared once: the SQL UI list, the task values, the query totals and the
 * docs' table all derive from [[ShareSourceMetrics.declared]].
 *
 * @param largest      the largest over the tasks, not their sum
 * @param queryTotal   also a running total in query progress, as `<name>Total`
 * @param driver       a driver metric (one value per batch), not a task's
 */
final case class MetricDeclaration(name: String, description: String, largest: Boolean, queryTotal: Boolean, driver: Boolean) {
  def totalName: String = s"${name}Total"

  def newMetric: CustomMetric = if (largest) new MaxOverTasks(name, description) else new SumOverTasks(name, description)
}

object ShareSourceMetrics {
  private def sum(name: String, description: String) =
    MetricDeclaration(name, description, largest = false, queryTotal = true, driver = false)
  private def max(name: String, description: String) =
    MetricDeclaration(name, description, largest = true, queryTotal = false, driver = false)

  val Acquired         = sum("recordsAcquired", "records acquired from the share group")
  val Accepted         = sum("recordsAccepted", "records ACCEPTed")
  val Released         = sum("recordsReleased", "records RELEASEd (not pinned: a failed, lost or limited read)")
  val Replayed         = sum("recordsReplayed", "records re-read from the acquisition log (retries, re-runs, second actions)")
  val Rejected         = sum("recordsRejected", "records REJECTed (poison records, explicit decisions)")
  val Dropped          = sum("redeliveriesDropped", "redeliveries of pinned records dropped (exactly-once strategies)")
  val MaxDeliveryCount = max("maxDeliveryCount", "highest delivery count seen")
  val LockUsedPercent  = max("lockUsedPercent", "share of the lock duration the slowest task held records (%)")
  val ConsumersCreated = sum("consumersCreated", "share consumers created (0 in steady state: the pool reuses them)")
  val AtLastDelivery = sum(
    "recordsAtLastDelivery",
    "records acquired on their last delivery attempt (share.delivery.count.limit): one more failure and the broker archives them"
  )

  /** Scan.reportDriverMetrics: one value per batch, the backlog when it was planned. */
  val Backlog =
    max("backlogRecords", "records available to the share group when the batch was planned (the broker's own lag from Kafka 4.2)")
      .copy(driver = true)

  val declared: Seq[MetricDeclaration] =
    Seq(
      Acquired,
      Accepted,
      Released,
      Replayed,
      Rejected,
      Dropped,
      MaxDeliveryCount,
      LockUsedPercent,
      ConsumersCreated,
      AtLastDelivery,
      Backlog
    )

  /** The progress's time lag: the oldest record the group holds (planning/BacklogAge), and the last batch's emitted records. */
  val BacklogAgeMs         = "backlogAgeMs"
  def timeLag: Seq[String] = Seq(BacklogAgeMs, QueryTotals.EmittedAgeMax, QueryTotals.EmittedAgeP99)

  /** What the read tasks report, in the order of [[declared]]. */
  val ofTasks: IndexedSeq[MetricDeclaration] = declared.filterNot(_.driver).toIndexedSeq

  def supported: Array[CustomMetric] = declared.map(_.newMetric).toArray

  def taskMetric(metricName: String, metricValue: Long): CustomTaskMetric = new CustomTaskMetric {
    override def name(): String = metricName
    override def value(): Long  = metricValue
  }
}

/**
 * Totals since the query started, for query progress: the read tasks add to these accumulators and
 * the driver reads them. A retried task counts again. Beside them, figures of the last batch only
 * (the emitted records' ages, the largest share of a lock a task used), which the driver resets as it
 * plans each batch ([[resetLastBatch]]).
 */
final class QueryTotals private (
    accumulators: Map[String, LongAccumulator],
    val emittedAges: EmittedAgesAccumulator,
    val lockUsed: MaxAccumulator,
    val taskMs: LongAccumulator // the last batch's read tasks' time, summed: what parallelism auto learns a task's pace from
) extends Serializable {

  def apply(metric: MetricDeclaration): LongAccumulator = accumulators(metric.name)

  def asMetrics: Map[String, String] =
    ShareSourceMetrics.ofTasks.filter(_.queryTotal).map(m => m.totalName -> accumulators(m.name).sum.toString).toMap

  /** Driver: the progress metrics of the batch whose tasks added to the last-batch figures. */
  def lastBatchMetrics: Map[String, String] = {
    val ages = emittedAges.value
    Map(
      QueryTotals.EmittedAgeMax               -> ages.max.toString,
      QueryTotals.EmittedAgeP99               -> ages.quantile(0.99).toString,
      ShareSourceMetrics.LockUsedPercent.name -> lockUsed.value.toString
    )
  }

  /** Driver, as a batch is planned: its tasks start the last-batch figures afresh. */
  def resetLastBatch(): Unit = { emittedAges.reset(); lockUsed.reset(); taskMs.reset() }

  def inTransit: QueryTotalsInTransit = new QueryTotalsInTransit(this)
}

object QueryTotals {
  val EmittedAgeMax = "emittedAgeMaxMs"
  val EmittedAgeP99 = "emittedAgeP99Ms"

  /** Registers one accumulator per metric with a query total (the SparkContext itself stays on the driver). */
  def apply(spark: org.apache.spark.SparkContext): QueryTotals = {
    val ages = new EmittedAgesAccumulator
    spark.register(ages, "kafka-share ages of the records the last batch emitted")
    val lockUsed = new MaxAccumulator
    spark.register(lockUsed, "kafka-share largest share of a lock a task of the last batch used (%)")
    new QueryTotals(
      ShareSourceMetrics.ofTasks.filter(_.queryTotal).map(m => m.name -> spark.longAccumulator(s"kafka-share ${m.description}")).toMap,
      ages,
      lockUsed,
      spark.longAccumulator("kafka-share time of the last batch's read tasks (ms)")
    )
  }
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

/** Counters of one read task, one per [[ShareSourceMetrics.ofTasks]]. */
final class TaskCounters {
  private val values = new Array[Long](ShareSourceMetrics.ofTasks.size)
  // Called per replayed record: the declarations are the object's own vals, so identity finds them
  // without comparing a case class's fields.
  private def index(metric: MetricDeclaration): Int = {
    val i = ShareSourceMetrics.ofTasks.indexWhere(_ eq metric)
    require(i >= 0, s"${metric.name} is not a task metric")
    i
  }

  def apply(metric: MetricDeclaration): Long = values(index(metric))

  /** Adds to a summed metric; a metric of the largest value keeps the larger of the two. */
  def add(metric: MetricDeclaration, n: Long): Unit = {
    val i = index(metric)
    values(i) = if (metric.largest) math.max(values(i), n) else values(i) + n
  }

  /** Adds this task's counts to the query totals, once, when the task's reader closes. */
  def addTo(totals: QueryTotals): Unit = {
    ShareSourceMetrics.ofTasks.filter(_.queryTotal).foreach(m => totals(m).add(apply(m)))
    totals.lockUsed.add(apply(ShareSourceMetrics.LockUsedPercent))
  }

  def toTaskMetrics: Array[CustomTaskMetric] =
    ShareSourceMetrics.ofTasks.map(m => ShareSourceMetrics.taskMetric(m.name, apply(m))).toArray
}
