package io.github.kafkashare.spark.offsets

import io.github.kafkashare.spark.errors.ShareSourceException
import org.scalatest.funsuite.AnyFunSuite

class ShareSourceOffsetSuite extends AnyFunSuite {

  private val offset = ShareSourceOffset(
    7,
    4,
    TopicPartitionRanges(Map(
      ("orders", 1) -> OffsetRanges(Seq(OffsetRange(5, 9))),
      ("orders", 0) -> OffsetRanges(Seq(OffsetRange(0, 3), OffsetRange(8, 8))),
      ("audit", 2)  -> OffsetRanges(Seq(OffsetRange(100, 200)))
    )),
    cluster = "c1",
    group = "g",
    topicIds = Map("orders" -> "id-o", "audit" -> "id-a")
  )

  test("JSON is deterministic: sorted topics and partitions, a version field") {
    assert(offset.json() ==
      """{"version":2,"batch":7,"tasks":4,"cluster":"c1","group":"g","topicIds":{"audit":"id-a","orders":"id-o"},""" +
      """"pinned":{"audit":{"2":[[100,200]]},"orders":{"0":[[0,3],[8,8]],"1":[[5,9]]}}}""")
  }

  test("JSON round trip") {
    assert(ShareSourceOffset.fromJson(offset.json()) == offset)
    assert(ShareSourceOffset.fromJson(ShareSourceOffset.initial.json()) == ShareSourceOffset.initial)
  }

  test("a real-time end names what its batch pinned and did not emit; other offsets keep their JSON") {
    val unemitted = Seq(AcquiredRun("orders", 0, 10, 12, 1), AcquiredRun("orders.eu-1", 3, 7, 7, 2))
    val realTime  = offset.copy(unemitted = unemitted)
    assert(realTime.json().endsWith(""","unemitted":["orders 0 10-12:1","orders.eu-1 3 7-7:2"]}"""))
    assert(realTime.json().startsWith("""{"version":3,"""), "a connector that ignores unemitted records must refuse the offset")
    assert(ShareSourceOffset.fromJson(realTime.json()) == realTime.copy(version = 3))
    assert(!offset.json().contains("unemitted"), "a micro-batch offset's JSON changed: Spark would take it for new data")
    val bad = intercept[ShareSourceException](ShareSourceOffset.fromJson(realTime.json().replace("10-12:1", "12-10:1")))
    assert(bad.getMessage.contains("BAD_OFFSET_JSON"))
  }

  test("a newer version is refused with what to do") {
    val e = intercept[ShareSourceException](ShareSourceOffset.fromJson("""{"version":4,"batch":1,"tasks":1,"pinned":{}}"""))
    assert(e.getMessage.contains("offset of version 4, newer than this connector reads (1 to 3)"))
  }

  test("version 1 offsets (no identity recorded) are still read") {
    val text = """{"version":1,"batch":7,"tasks":4,"pinned":{"orders":{"0":[[0,3]]}}}"""
    val old  = ShareSourceOffset.fromJson(text)
    assert(old.batch == 7 && old.tasks == 4 && old.pinned.contains("orders", 0, 3))
    assert(old.cluster.isEmpty && old.group.isEmpty && old.topicIds.isEmpty)
    // Spark compares offsets by their JSON: one read from the log must write back the same text.
    assert(old.json() == text)
  }

  test("an offset Spark read back from its log (SerializedOffset) converts like ours") {
    val serialized = org.apache.spark.sql.execution.streaming.SerializedOffset(offset.json())
    assert(ShareSourceOffset.of(serialized) == offset)
    assert(ShareSourceOffset.of(offset) eq offset)
  }

  test("malformed JSON is refused with an example of the expected form") {
    Seq(
      "",
      "{",
      "[]",
      """{"version":1}""",
      """{"version":1,"batch":1,"tasks":1,"pinned":{"t":{"0":[[1]]}}}""",
      """{"version":1,"batch":1,"tasks":1,"pinned":{"t":{"x":[[1,2]]}}}"""
    ).foreach { bad =>
      val e = intercept[ShareSourceException](ShareSourceOffset.fromJson(bad))
      assert(e.getMessage.contains("expected for example"), bad)
    }
  }
}
