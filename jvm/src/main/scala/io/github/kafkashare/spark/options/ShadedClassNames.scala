package io.github.kafkashare.spark.options

import org.apache.kafka.clients.consumer.KafkaShareConsumer

/**
 * Users write Kafka class names as Kafka documents them (`org.apache.kafka.common.security.plain.PlainLoginModule`
 * in `sasl.jaas.config`, callback handler classes, ...), but the connector jar carries kafka-clients under
 * another package (docs/internals/packaging.md). This maps those names to the package the clients
 * really live in, so both the documented and the shaded spellings work.
 */
object ShadedClassNames {

  // Built at run time: the shading step rewrites string constants that spell the Kafka package.
  private val documentedPackage = Seq("org", "apache", "kafka").mkString(".") + "."

  /** `org.apache.kafka.` in tests and unshaded builds, the shaded package inside the connector jar. */
  private val actualPackage =
    classOf[KafkaShareConsumer[_, _]].getName.stripSuffix("clients.consumer.KafkaShareConsumer")

  /** Client settings whose values name classes. */
  def namesClasses(key: String): Boolean =
    key == "sasl.jaas.config" || key == "metric.reporters" || key.endsWith(".class") || key.endsWith(".classes")

  def rewrite(key: String, value: String): String =
    if (actualPackage == documentedPackage || !namesClasses(key)) value
    else value.replace(documentedPackage, actualPackage)
}
