package io.github.kafkashare.spark.sparkinternals

import java.util
import java.util.concurrent.ConcurrentLinkedQueue

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.connector.catalog.{SupportsRead, Table, TableCapability, TableProvider}
import org.apache.spark.sql.connector.expressions.Transform
import org.apache.spark.sql.connector.read.{InputPartition, PartitionReader, PartitionReaderFactory, Scan, ScanBuilder}
import org.apache.spark.sql.connector.read.streaming.{MicroBatchStream, Offset}
import org.apache.spark.sql.types.{LongType, StructField, StructType}
import org.apache.spark.sql.util.CaseInsensitiveStringMap

/**
 * A streaming source for [[SparkInternalsCheck]] only: one row per batch (the batch's end offset), and at
 * each call Spark makes where the kafka-share source reads Spark's internals, what it saw there, so that the
 * check tries them where the source meets them. Spark finds it by its class name; nothing else uses it.
 */
final class ProbeSource extends TableProvider {
  override def inferSchema(options: CaseInsensitiveStringMap): StructType = ProbeSource.Schema
  override def getTable(schema: StructType, partitioning: Array[Transform], properties: util.Map[String, String]): Table =
    new Table with SupportsRead {
      override def name(): String                                                 = "kafka-share-probe"
      override def schema(): StructType                                           = ProbeSource.Schema
      override def capabilities(): util.Set[TableCapability]                      = util.EnumSet.of(TableCapability.MICRO_BATCH_READ)
      override def newScanBuilder(options: CaseInsensitiveStringMap): ScanBuilder = () => new ProbeScan
    }
}

object ProbeSource {

  val Schema: StructType = StructType(Seq(StructField("end", LongType)))

  /** What the source saw at one of Spark's calls (the start, latestOffset, planInputPartitions), in order. */
  final case class Seen(
      call: String,
      thread: String,
      batchIdProperty: Option[Long],
      end: Long = -1L,
      sink: Option[String] = None,
      trigger: Option[String] = None,
      sourceDir: String = "",
      description: String = ""
  )

  val seen = new ConcurrentLinkedQueue[Seen]()

  private[sparkinternals] def note(call: String, end: Long = -1L): Seen =
    Seen(call, Thread.currentThread.getName, SparkBatchId.onThisThread(), end)
}

private final class ProbeScan extends Scan {
  override def readSchema(): StructType = ProbeSource.Schema
  override def toMicroBatchStream(checkpointLocation: String): MicroBatchStream = {
    val spark  = SparkSession.active
    val stream = new ProbeStream
    ProbeSource.seen.add(ProbeSource.note("start").copy(
      sink = QuerySink.ofCurrentQuery(spark),
      trigger = QuerySink.triggerOfCurrentQuery(spark),
      sourceDir = checkpointLocation,
      description = stream.toString
    ))
    stream
  }
}

private final case class ProbeOffset(end: Long) extends Offset {
  override def json(): String = end.toString
}

private final case class ProbePartition(end: Long) extends InputPartition

private final class ProbeStream extends MicroBatchStream {
  private var latest = 0L

  override def initialOffset(): Offset                 = ProbeOffset(0L)
  override def deserializeOffset(json: String): Offset = ProbeOffset(json.trim.toLong)
  override def commit(end: Offset): Unit               = ()
  override def stop(): Unit                            = ()

  // A new end at every call: every trigger runs a batch.
  override def latestOffset(): Offset = {
    latest += 1
    ProbeSource.seen.add(ProbeSource.note("latestOffset", latest))
    ProbeOffset(latest)
  }

  override def planInputPartitions(start: Offset, end: Offset): Array[InputPartition] = {
    val last = end.asInstanceOf[ProbeOffset].end
    ProbeSource.seen.add(ProbeSource.note("planInputPartitions", last))
    Array(ProbePartition(last))
  }

  override def createReaderFactory(): PartitionReaderFactory = (partition: InputPartition) =>
    new PartitionReader[InternalRow] {
      private var done                = false
      override def next(): Boolean    = { val more = !done; done = true; more }
      override def get(): InternalRow = CatalystRows.row(Array[Any](partition.asInstanceOf[ProbePartition].end))
      override def close(): Unit      = ()
    }

  override def toString: String = s"ProbeStream[${System.identityHashCode(this)}]"
}
