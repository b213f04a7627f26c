package io.github.kafkashare.spark.ack

import java.util
import java.util.UUID

import scala.collection.mutable

import io.github.kafkashare.spark.errors.ShareSourceErrors
import io.github.kafkashare.spark.offsets.{AcquisitionLog, DecisionLog, OffsetRanges, TopicPartitionRanges}
import io.github.kafkashare.spark.options.Decision
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.connector.catalog.{SupportsWrite, Table, TableCapability}
import org.apache.spark.sql.connector.write._
import org.apache.spark.sql.types._

/**
 * `decisions.write.format("kafka-share-decisions")`: what foreachBatch decided for records of the
 * batch it was given, stored in the query's decision log. The consumers that hold the records apply
 * the decisions once the batch commits (CommitWatcher).
 *
 * Checked here, before anything is stored: the columns, that the group has a running explicit-mode
 * query that is not past this batch, every decision's name, and that every record belongs to the
 * batch. Membership is checked in the write tasks against the acquisition log as it is then: the
 * decisions may be the first action on the batch, so its records are pinned while they are decided.
 */
final class DecisionsTable(groupId: String, batch: Long) extends Table with SupportsWrite {

  override def name(): String = s"kafka-share decisions [group=$groupId, batch=$batch]"

  override def schema(): StructType = DecisionsTable.Schema

  // The decisions can come with more columns (the whole batch row, say): only the four are read.
  override def capabilities(): util.Set[TableCapability] =
    util.EnumSet.of(TableCapability.BATCH_WRITE, TableCapability.ACCEPT_ANY_SCHEMA)

  override def newWriteBuilder(info: LogicalWriteInfo): WriteBuilder = {
    val columns      = DecisionsTable.columnsOf(info.schema())
    val registration = ExplicitQueries.lookup(groupId, batch)
    val inBatch      = new BatchMembership(registration.acquisitions, batch)
    new WriteBuilder {
      override def build(): Write = new Write {
        override def toBatch: BatchWrite = new DecisionsBatchWrite(registration.decisions, batch, columns, inBatch)
      }
    }
  }
}

object DecisionsTable {
  val Schema: StructType = StructType(Seq(
    StructField("topic", StringType),
    StructField("partition", IntegerType),
    StructField("offset", LongType),
    StructField("decision", StringType)
  ))

  /** Ordinals of topic, partition, offset and decision in `schema`, or a clear error. */
  def columnsOf(schema: StructType): DecisionColumns = {
    def ordinal(field: StructField): Option[Int] = schema.fields.indexWhere(f =>
      f.name.equalsIgnoreCase(field.name) && f.dataType == field.dataType
    ) match { case -1 => None; case i => Some(i) }
    Schema.fields.map(ordinal) match {
      case Array(Some(t), Some(p), Some(o), Some(d)) => DecisionColumns(t, p, o, d)
      case _ => throw ShareSourceErrors.decisionColumns(schema.fields.map(f => s"${f.name} ${f.dataType.simpleString}").mkString(", "))
    }
  }
}

final case class DecisionColumns(topic: Int, partition: Int, offset: Int, decision: Int)

/**
 * Whether a record belongs to `batch`, from its acquisition log: the parts written when the write was
 * planned (read once, on the driver), and on a miss the parts written since. The decisions may be the
 * first action on the batch, so its read tasks pin records while the decisions on them are written
 * (the same task reads and decides, or a sibling of it does); each part is pinned before its records
 * are emitted, so a record that is in the batch is in the log by the time its decision comes.
 */
final class BatchMembership(log: AcquisitionLog, batch: Long) extends Serializable {
  private var partsRead = Set.empty[(Int, Int)]
  private var known     = TopicPartitionRanges.empty
  readNewParts()

  def contains(topic: String, partition: Int, offset: Long): Boolean =
    known.contains(topic, partition, offset) || { readNewParts(); known.contains(topic, partition, offset) }

  private def readNewParts(): Unit = log.partNames(batch).filterNot(partsRead).foreach { case name @ (task, part) =>
    log.read(batch, task, part).foreach(e => known = known.union(e.offsets))
    partsRead += name
  }
}

final case class DecisionFileWritten(file: String, released: TopicPartitionRanges) extends WriterCommitMessage

final class DecisionsBatchWrite(log: DecisionLog, batch: Long, columns: DecisionColumns, inBatch: BatchMembership)
    extends BatchWrite {

  private val callId = UUID.randomUUID().toString

  override def createBatchWriterFactory(info: PhysicalWriteInfo): DataWriterFactory =
    new DecisionsWriterFactory(log, batch, columns, inBatch, callId)

  override def commit(messages: Array[WriterCommitMessage]): Unit = {
    val written = messages.collect { case m: DecisionFileWritten => m }
    log.writeManifest(batch, written.map(_.file).toSeq, written.foldLeft(TopicPartitionRanges.empty)((acc, m) => acc.union(m.released)))
  }

  // Files of a failed call are never named by a manifest, so nothing reads them.
  override def abort(messages: Array[WriterCommitMessage]): Unit = ()
}

final class DecisionsWriterFactory(log: DecisionLog, batch: Long, columns: DecisionColumns, inBatch: BatchMembership, callId: String)
    extends DataWriterFactory {
  override def createWriter(partitionId: Int, taskId: Long): DataWriter[InternalRow] =
    new DecisionsWriter(log, batch, columns, inBatch, s"$callId-$partitionId-$taskId")
}

final class DecisionsWriter(log: DecisionLog, batch: Long, columns: DecisionColumns, inBatch: BatchMembership, file: String)
    extends DataWriter[InternalRow] {

  private val decisions = mutable.ArrayBuffer.empty[(Decision, String, Int, Long)]
  private val released  = mutable.Map.empty[(String, Int), mutable.ArrayBuffer[Long]]

  override def write(row: InternalRow): Unit = {
    val topic     = if (row.isNullAt(columns.topic)) "null" else row.getUTF8String(columns.topic).toString
    val partition = row.getInt(columns.partition)
    val offset    = row.getLong(columns.offset)
    val name      = if (row.isNullAt(columns.decision)) "null" else row.getUTF8String(columns.decision).toString
    val decision  = Decision.parse(name).getOrElse(throw ShareSourceErrors.unknownDecision(name, topic, partition, offset))
    if (!inBatch.contains(topic, partition, offset)) throw ShareSourceErrors.recordNotInBatch(topic, partition, offset, batch)
    decisions += ((decision, topic, partition, offset))
    if (decision == Decision.Release) released.getOrElseUpdate((topic, partition), mutable.ArrayBuffer.empty) += offset
  }

  override def commit(): WriterCommitMessage = {
    log.writeFile(batch, file, decisions.iterator)
    DecisionFileWritten(file, TopicPartitionRanges(released.map { case (tp, o) => tp -> OffsetRanges.ofOffsets(o) }.toMap))
  }

  override def abort(): Unit = ()

  override def close(): Unit = ()
}
