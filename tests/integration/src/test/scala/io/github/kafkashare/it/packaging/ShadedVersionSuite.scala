package io.github.kafkashare.it.packaging

import java.io.File
import java.net.{URL, URLClassLoader}
import java.nio.file.{Files, Path}

import io.github.kafkashare.testkit.ProjectPaths
import org.scalatest.funsuite.AnyFunSuite

/**
 * The connector jar beside the kafka-clients that Spark's own Kafka source brings (an older line), that
 * one first on the class path, as an application that uses both sources may have them: the shaded client
 * must still report its own version, which is also the version it sends brokers (ApiVersions). Kafka's
 * client reads it from a resource; unless the shading moves that resource too, the first copy on the class
 * path wins (build.sbt). Needs `connector/assembly` first (`make test-jvm` runs it before this suite).
 */
final class ShadedVersionSuite extends AnyFunSuite {

  private val root = ProjectPaths.root

  private def connectorJar: Path = {
    val jar = root.resolve(s"jvm/target/scala-2.13/spark-kafka-share_2.13-${pinned("project.version")}.jar")
    assert(Files.exists(jar), s"$jar is missing: run sbt connector/assembly first")
    jar
  }

  private def pinned(key: String): String = {
    val props = new java.util.Properties
    val in    = Files.newInputStream(root.resolve("versions.properties"))
    try props.load(in)
    finally in.close()
    props.getProperty(key)
  }

  private def jarOf(cls: Class[_]): URL = cls.getProtectionDomain.getCodeSource.getLocation

  test("the shaded client reports the bundled kafka-clients version with Spark's Kafka client first on the class path") {
    val sparkKafkaClients = new File(new String(Files.readAllBytes(root.resolve("target/spark-kafka-clients.path"))).trim)
    assert(sparkKafkaClients.exists, s"$sparkKafkaClients is missing: run sbt harness/fetchSparkKafkaClients")
    val bundled = pinned("kafka.clients")
    assert(!sparkKafkaClients.getName.contains(bundled), s"Spark's Kafka source brings the bundled version itself ($sparkKafkaClients)")
    // Only these on the class path (no parent but the JDK's): Spark's Kafka client first, then the
    // connector, the Scala library and SLF4J, which the connector leaves to Spark.
    val urls = Array(
      sparkKafkaClients.toURI.toURL,
      connectorJar.toUri.toURL,
      jarOf(classOf[scala.Option[_]]),
      jarOf(classOf[org.slf4j.Logger])
    )
    val loader = new URLClassLoader(urls, ClassLoader.getPlatformClassLoader)
    try {
      val info     = loader.loadClass("io.github.kafkashare.spark.diagnostics.ConnectorInfo$")
      val module   = info.getField("MODULE$").get(null)
      val reported = info.getMethod("kafkaClientsVersion").invoke(module)
      assert(reported == bundled, s"the shaded client said it is kafka-clients $reported")
      // The unshaded client on the same class path still reads its own copy.
      val theirs = loader.loadClass("org.apache.kafka.common.utils.AppInfoParser").getMethod("getVersion").invoke(null)
      assert(theirs != bundled && sparkKafkaClients.getName.contains(s"-$theirs.jar"), s"Spark's client said $theirs")
    } finally loader.close()
  }

  test("the shading leaves the client's JMX names alone") {
    val loader = new URLClassLoader(Array(connectorJar.toUri.toURL, jarOf(classOf[org.slf4j.Logger])), ClassLoader.getPlatformClassLoader)
    try {
      val utils = loader.loadClass("io.github.kafkashare.shaded.kafka.clients.consumer.internals.ConsumerUtils")
      assert(utils.getField("CONSUMER_JMX_PREFIX").get(null) == "kafka.consumer")
    } finally loader.close()
  }
}
