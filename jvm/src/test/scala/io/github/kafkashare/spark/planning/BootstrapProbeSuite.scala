package io.github.kafkashare.spark.planning

import java.net.ServerSocket

import org.scalatest.funsuite.AnyFunSuite

class BootstrapProbeSuite extends AnyFunSuite {

  private def closedPort(): Int = {
    val s = new ServerSocket(0);
    try s.getLocalPort
    finally s.close()
  }

  test("an address that accepts, in every form Kafka's client reads, is no refusal") {
    val listening = new ServerSocket(0)
    try {
      val port = listening.getLocalPort
      Seq(s"127.0.0.1:$port", s"SASL_SSL://127.0.0.1:$port", s"localhost:$port", s"127.0.0.1:${closedPort()}, 127.0.0.1:$port")
        .foreach(servers => assert(BootstrapProbe.firstRefusal(servers, 2000).isEmpty, servers))
    } finally listening.close()
  }

  test("addresses that all refuse are said, with the reason, once the deadline passes") {
    val started = System.nanoTime
    val refusal = BootstrapProbe.firstRefusal(s"127.0.0.1:${closedPort()}", 1500)
    assert(refusal.exists(_.getMessage.contains("refused")), refusal)
    assert((System.nanoTime - started) / 1e9 < 5)
  }

  test("what it cannot check (no port, a host that does not resolve) is left to the client") {
    assert(BootstrapProbe.firstRefusal("broker", 1000).isEmpty)
    assert(BootstrapProbe.firstRefusal("no-such-broker.invalid:9092", 1000).isEmpty)
  }
}
