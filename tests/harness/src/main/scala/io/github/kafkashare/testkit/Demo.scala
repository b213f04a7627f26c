package io.github.kafkashare.testkit

import java.nio.file.Files

/**
 * `make demo` for the foundation: an embedded broker, a topic, records produced, and a Kafka
 * share consumer reading them back, with what it read printed. (The Spark demo replaces it once the
 * source exists.)
 */
object Demo {
  def main(args: Array[String]): Unit = {
    val version = args.headOption.getOrElse(ProjectPaths.newestBrokerVersion)
    val count   = 1000
    val dir     = Files.createTempDirectory("kafka-share-demo")
    println(s"Starting Kafka $version (single-node KRaft, share groups on) in $dir ...")
    val broker = KafkaBroker.start(version, dir)
    try {
      val ops = new KafkaTestOps(broker.bootstrapServers)
      ops.createTopic("demo", 3)
      ops.readFromEarliest("demo-group")
      ops.produce("demo", count)
      println(s"Produced $count records to topic 'demo' (3 partitions) at ${broker.bootstrapServers}")
      val records = ops.shareConsume("demo-group", Seq("demo"), count)
      records.take(5).foreach(r => println(s"  read ${r.topic}-${r.partition}@${r.offset} key=${r.key} deliveryCount=${r.deliveryCount}"))
      records.groupBy(_.partition).toSeq.sortBy(_._1).foreach { case (p, rs) => println(s"  partition $p: ${rs.size} records") }
      val distinctKeys = records.map(_.key).distinct.size
      println(s"Share group 'demo-group' read ${records.size} records, $distinctKeys distinct keys of $count produced")
      println(s"Group state via Admin: ${ops.shareGroupState("demo-group").toJson}")
      if (distinctKeys != count) sys.exit(1)
    } finally {
      broker.stop()
      println(s"Broker stopped; its log: ${broker.logFile}")
    }
  }
}
