package io.github.kafkashare.spark.reader

import io.github.kafkashare.spark.consumer.PooledShareConsumer
import io.github.kafkashare.spark.offsets.AcquisitionEntry

/** A part as the acquisition log pins it: its records in the order a replay of it yields them (topic, partition, offset), and its entry. */
private[reader] object PartEntry {

  def of(records: Seq[PooledShareConsumer.Record]): (Seq[PooledShareConsumer.Record], AcquisitionEntry) = {
    val ordered = records.sorted(ReplayOrder)
    (ordered, AcquisitionEntry.of(ordered.map(r => (r.topic, r.partition, r.offset, PooledShareConsumer.deliveryCountOf(r)))))
  }

  private object ReplayOrder extends Ordering[PooledShareConsumer.Record] {
    def compare(a: PooledShareConsumer.Record, b: PooledShareConsumer.Record): Int =
      AcquisitionEntry.compareRecords(a.topic, a.partition, a.offset, b.topic, b.partition, b.offset)
  }
}
