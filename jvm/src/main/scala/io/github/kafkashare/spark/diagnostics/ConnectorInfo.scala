package io.github.kafkashare.spark.diagnostics

import java.util.Properties

import org.apache.kafka.common.utils.internals.AppInfoParser

/** Which connector and which (bundled, shaded) kafka-clients are loaded in this JVM. */
object ConnectorInfo {

  /** The project version, written into the jar by the build. */
  lazy val version: String = {
    val props = new Properties
    val in    = getClass.getResourceAsStream("/io/github/kafkashare/spark/version.properties") // where the build writes it
    if (in != null)
      try props.load(in)
      finally in.close()
    props.getProperty("version", "unknown")
  }

  /** The version kafka-clients reports about itself, read from the classes actually loaded. */
  def kafkaClientsVersion: String = AppInfoParser.getVersion

  def describe: String = s"spark-kafka-share $version (kafka-clients $kafkaClientsVersion)"
}
