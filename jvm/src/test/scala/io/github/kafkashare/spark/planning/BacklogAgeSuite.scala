package io.github.kafkashare.spark.planning

import java.util.Collections

import scala.jdk.CollectionConverters._

import org.apache.kafka.clients.consumer.{ConsumerRecord, MockConsumer}
import org.apache.kafka.common.TopicPartition
import org.scalatest.funsuite.AnyFunSuite

class BacklogAgeSuite extends AnyFunSuite {

  private final class Reads(stamps: Map[(String, Int), Long]) {
    var asked = Seq.empty[Map[(String, Int), Long]]
    def read(offsets: Map[(String, Int), Long]): Map[(String, Int), Long] = {
      asked :+= offsets
      stamps.filter { case (tp, _) => offsets.contains(tp) }
    }
  }

  test("the oldest record's age over the partitions with a backlog, read at most every 5 s; 0 without a backlog") {
    var now   = 100000L
    val reads = new Reads(Map(("a", 0) -> 40000L, ("a", 1) -> 70000L))
    val age   = new BacklogAge(reads.read, () => now)
    age.planned(Map(("a", 0) -> 5L, ("a", 1) -> 9L))
    assert(age.current == 60000L && reads.asked == Seq(Map(("a", 0) -> 5L, ("a", 1) -> 9L)))
    now += 4999
    age.planned(Map(("a", 1) -> 9L))
    assert(reads.asked.size == 1 && age.current == 60000L, "not read again within 5 s")
    now += 1
    age.planned(Map(("a", 1) -> 9L))
    assert(reads.asked.size == 2 && age.current == 35000L)
    age.noBacklog()
    assert(age.current == 0L)
    age.planned(Map.empty)
    assert(age.current == 0L && reads.asked.size == 2, "no read without a backlog")
  }

  test("run elsewhere (real time's look-ahead thread), planning does not wait for the read; the age comes when it ends") {
    val reads   = new Reads(Map(("a", 0) -> 40000L))
    val age     = new BacklogAge(reads.read, () => 100000L)
    var pending = Seq.empty[() => Unit]
    age.runIn(body => pending :+= body)
    age.planned(Map(("a", 0) -> 5L))
    assert(reads.asked.isEmpty && age.current == 0L, "read while planning")
    pending.foreach(_())
    assert(reads.asked.size == 1 && age.current == 60000L)
  }

  test("run elsewhere, a read that ends after a look found no backlog does not bring back an age") {
    var now     = 100000L
    val reads   = new Reads(Map(("a", 0) -> 40000L))
    val age     = new BacklogAge(reads.read, () => now)
    var pending = Seq.empty[() => Unit]
    age.runIn(body => pending :+= body)
    age.planned(Map(("a", 0) -> 5L))
    age.noBacklog()
    pending.foreach(_())
    assert(reads.asked.size == 1 && age.current == 0L, "the late read set an age with no backlog")
  }

  test("a read that finds nothing, or fails, keeps the age it had") {
    var now  = 10000L
    var fail = false
    val age = new BacklogAge(
      offsets => if (fail) throw new RuntimeException("timeout") else if (now < 20000L) Map(("a", 0) -> 4000L) else Map.empty,
      () => now
    )
    age.planned(Map(("a", 0) -> 1L))
    now = 20000L
    age.planned(Map(("a", 0) -> 1L))
    assert(age.current == 6000L)
    now = 30000L; fail = true
    age.planned(Map(("a", 0) -> 1L))
    assert(age.current == 6000L)
  }

  test("the timestamp of the first record at or after each offset, each partition once, by a plain consumer") {
    val consumer = new MockConsumer[Array[Byte], Array[Byte]]("earliest")
    val (p0, p1) = (new TopicPartition("a", 0), new TopicPartition("a", 1))
    consumer.updateBeginningOffsets(Map(p0 -> java.lang.Long.valueOf(0L), p1 -> java.lang.Long.valueOf(0L)).asJava)
    def record(tp: TopicPartition, offset: Long, timestamp: Long) =
      new ConsumerRecord[Array[Byte], Array[Byte]](
        tp.topic,
        tp.partition,
        offset,
        timestamp,
        org.apache.kafka.common.record.TimestampType.CREATE_TIME,
        0,
        0,
        Array.emptyByteArray,
        Array.emptyByteArray,
        new org.apache.kafka.common.header.internals.RecordHeaders,
        java.util.Optional.empty[Integer]
      )
    val reader = new RecordTimestamps(consumer, budgetMs = 2000)
    consumer.schedulePollTask(() => {
      // a-0 from offset 5: the records below it are acknowledged, offset 6 is the first left (5 is a marker)
      consumer.addRecord(record(p0, 6, 1006)); consumer.addRecord(record(p0, 7, 1007))
      consumer.addRecord(record(p1, 3, 2003))
    })
    val stamps = reader.at(Map(("a", 0) -> 5L, ("a", 1) -> 3L))
    assert(stamps == Map(("a", 0) -> 1006L, ("a", 1) -> 2003L))
    assert(consumer.paused().isEmpty, "resumed for the next read")
    assert(consumer.assignment() == Set(p0, p1).asJava)
    assert(reader.at(Map.empty).isEmpty && consumer.assignment() == Collections.emptySet[TopicPartition]())
  }
}
