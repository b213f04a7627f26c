package io.github.kafkashare.spark.planning

import org.scalatest.funsuite.AnyFunSuite

class BrokerFeaturesSuite extends AnyFunSuite {

  test("the broker's line from the highest metadata.version its software supports") {
    assert(BrokerFeatures.lineOf(27) == "4.1")
    assert(BrokerFeatures.lineOf(28) == "4.1")
    assert(BrokerFeatures.lineOf(29) == "4.2")
    assert(BrokerFeatures.lineOf(30) == "4.3")
    assert(BrokerFeatures.lineOf(33) == "4.4")
    assert(BrokerFeatures.lineOf(35) == "4.4+")
  }

  test("a 4.1 broker offers nothing beyond share groups, and says why") {
    val f = BrokerFeatures.of(27, 27, shareVersion = 1, Some(Map("share.record.lock.duration.ms" -> "30000")))
    assert(!f.renew.available && f.renew.why.contains("KIP-1222"))
    assert(!f.strictAcquisition.available && f.strictAcquisition.why.contains("KIP-1206"))
    assert(!f.brokerLag.available && !f.groupLimits.available && !f.brokerDeadLetters.available)
    assert(f.describe.startsWith("Kafka 4.1 broker; in use: -; not available: RENEW: Kafka 4.1 brokers cannot renew"))
  }

  test("RENEW from 4.2, unless the group turns it off or its settings cannot be read") {
    assert(BrokerFeatures.of(29, 29, 1, Some(Map.empty)).renew.available)
    assert(BrokerFeatures.of(30, 30, 1, Some(Map("share.renew.acknowledge.enable" -> "true"))).renew.available)
    val off = BrokerFeatures.of(33, 33, 2, Some(Map("share.renew.acknowledge.enable" -> "FALSE")))
    assert(!off.renew.available && off.renew.why == "the group sets share.renew.acknowledge.enable=false")
    assert(!BrokerFeatures.of(33, 33, 2, None).renew.available)
  }

  test("what needs 4.2 waits for the cluster's finalized metadata.version: a 4.1 broker with testing levels, an upgrade half done") {
    val f = BrokerFeatures.of(29, 27, 1, Some(Map.empty))
    assert(f.line == "4.2" && !f.renew.available && !f.brokerLag.available && !f.strictAcquisition.available, f.describe)
    assert(f.renew.why.contains("metadata.version is 27"))
  }

  test("group limits where the broker reports them as group configs (4.3), dead letters with share.version 2") {
    val f = BrokerFeatures.of(33, 33, 2, Some(Map("share.partition.max.record.locks" -> "2000")))
    assert(f.groupLimits.available && f.brokerDeadLetters.available && f.brokerLag.available)
    assert(f.describe == "Kafka 4.4 broker; in use: RENEW, strict acquisition, broker lag, group limits, broker dead letters")
    assert(!BrokerFeatures.of(33, 33, 1, Some(Map.empty)).brokerDeadLetters.available)
  }
}
