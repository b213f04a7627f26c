package io.github.kafkashare.spark.monitoring

import io.github.kafkashare.spark.consumer.{ConsumerKey, PooledShareConsumer}
import org.apache.kafka.clients.consumer.MockShareConsumer
import org.scalatest.funsuite.AnyFunSuite
import io.github.kafkashare.spark.options.LockBudget

class JvmActivitySuite extends AnyFunSuite {

  private val key = ConsumerKey("g", Map.empty, LockBudget(120000L), "subscribe=orders", "/tmp/checkpoint")

  test("a share consumer counts from when it opens until it closes, once however often it is closed") {
    val before   = JvmActivity.shareConsumers
    val consumer = new PooledShareConsumer(key, _ => new MockShareConsumer[Array[Byte], Array[Byte]])
    assert(JvmActivity.shareConsumers == before + 1)
    consumer.close()
    consumer.close()
    assert(JvmActivity.shareConsumers == before)
  }
}
