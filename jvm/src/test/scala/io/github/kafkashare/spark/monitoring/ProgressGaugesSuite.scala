package io.github.kafkashare.spark.monitoring

import org.scalatest.funsuite.AnyFunSuite

class ProgressGaugesSuite extends AnyFunSuite {

  private val source = "KafkaShareMicroBatchStream[orders-group]"

  test("a name part keeps letters, digits, '_' and '-'; anything else becomes '_'") {
    assert(MetricNames.sanitize("orders.daily query/1 é") == "orders_daily_query_1__")
    assert(MetricNames.sanitize("a-b_C9") == "a-b_C9")
  }

  test("every numeric metric is a gauge; '-' of deliveryCountLimit is -1; backlog per topic; other strings are left out") {
    val gauges = ProgressGauges.of(
      Seq(source -> Map(
        "backlogRecords"        -> "1200",
        "deliveryCountLimit"    -> "-",
        "backlogRecordsByTopic" -> "orders=1200,pay.ments=0",
        "lockUsedPercent"       -> "42",
        "someText"              -> "n/a"
      ))
    )
    assert(gauges == Map(
      "backlogRecords"                 -> 1200L,
      "deliveryCountLimit"             -> -1L,
      "topic.orders.backlogRecords"    -> 1200L,
      "topic.pay_ments.backlogRecords" -> 0L,
      "lockUsedPercent"                -> 42L
    ))
    assert(ProgressGauges.of(Seq(source -> Map("deliveryCountLimit" -> "5"))) == Map("deliveryCountLimit" -> 5L))
  }

  test("only kafka-share sources count; a union's second and later sources go under source1., source2.") {
    val gauges = ProgressGauges.of(
      Seq(
        "KafkaV2[Subscribe[x]]" -> Map("avgOffsetsBehindLatest" -> "3"),
        source                  -> Map("backlogRecords" -> "1"),
        source                  -> Map("backlogRecords" -> "2"),
        source                  -> Map("backlogRecords" -> "3")
      )
    )
    assert(gauges == Map("backlogRecords" -> 1L, "source1.backlogRecords" -> 2L, "source2.backlogRecords" -> 3L))
  }
}
