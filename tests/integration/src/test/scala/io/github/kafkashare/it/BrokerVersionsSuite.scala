package io.github.kafkashare.it

import java.nio.file.{Files, Path}
import java.util.concurrent.atomic.AtomicInteger

import io.github.kafkashare.testkit.{KafkaBroker, KafkaTestOps, ProjectPaths}
import org.scalatest.{BeforeAndAfterAll, Failed, Outcome}
import org.scalatest.funsuite.AnyFunSuite

/**
 * Runs each test against a real broker of every version the build fetched (oldest and newest 4.x).
 * One broker per version for the whole suite; a failing test prints that broker's log tail.
 */
abstract class BrokerVersionsSuite extends AnyFunSuite with BeforeAndAfterAll {

  private val dirs    = ProjectPaths.brokerVersions.map(v => v -> Files.createTempDirectory(s"kafka-$v-")).toMap
  private var brokers = Map.empty[String, KafkaBroker]
  private val counter = new AtomicInteger()

  override def beforeAll(): Unit = {
    assert(ProjectPaths.brokerVersions.nonEmpty, "no broker version fetched: run sbt harness/fetchBrokers")
    brokers = dirs.map { case (v, dir) => v -> KafkaBroker.start(v, dir) }
  }

  override def afterAll(): Unit = {
    brokers.values.foreach(b => if (b.isAlive) b.stop())
    dirs.values.foreach(stream.TestDirs.deleteRecursively)
  }

  /** A topic or group name no other test uses. */
  protected def fresh(prefix: String): String = s"$prefix-${counter.incrementAndGet()}"

  /** Declares `name` once per broker version. */
  protected def testEachBroker(name: String)(body: (KafkaBroker, KafkaTestOps) => Unit): Unit =
    ProjectPaths.brokerVersions.foreach { v =>
      test(s"$name [Kafka $v]") {
        val broker = brokers(v)
        if (!broker.isAlive) broker.start()
        body(broker, new KafkaTestOps(broker.bootstrapServers))
      }
    }

  protected def dataDir(version: String): Path = dirs(version)

  override def withFixture(test: NoArgTest): Outcome = super.withFixture(test) match {
    case failed: Failed =>
      brokers.values.foreach(b => info(s"--- last lines of ${b.logFile} ---\n${b.logTail()}"))
      failed
    case other => other
  }
}
