package io.github.kafkashare.spark.reader

import org.apache.kafka.clients.consumer.ConsumerRecord
import io.github.kafkashare.spark.sparkinternals.CatalystRows
import org.apache.spark.sql.catalyst.InternalRow

/** Kafka records to rows of [[RecordSchema]]. */
object RecordRows {

  /** @param deliveryCount as acquired (a replay passes the logged count, so a re-read is identical) */
  def toRow(record: ConsumerRecord[Array[Byte], Array[Byte]], deliveryCount: Int, includeHeaders: Boolean): InternalRow = {
    val values = new Array[Any](if (includeHeaders) 9 else 8)
    values(0) = record.key
    values(1) = record.value
    values(2) = CatalystRows.string(record.topic)
    values(3) = record.partition
    values(4) = record.offset
    values(5) = record.timestamp * 1000L // Spark timestamps are microseconds
    values(6) = record.timestampType.id
    values(7) = deliveryCount
    if (includeHeaders) {
      val headers = record.headers.toArray
      values(8) = if (headers.isEmpty) null
      else CatalystRows.array(headers.map(h => CatalystRows.row(Array[Any](CatalystRows.string(h.key), h.value))))
    }
    CatalystRows.row(values)
  }
}
