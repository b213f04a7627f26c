package io.github.kafkashare.testkit

import java.nio.file.Paths

/**
 * The harness as a command, for the Python tests and the Makefile:
 * {{{
 *   start <version> <dir> [share-groups-off|secure]   start (or restart) the broker in dir; prints its bootstrap servers
 *   start-cluster <version> <dir> <nodes>   start (or restart) a cluster in dir/node-1..; prints its bootstrap servers
 *   note <dir> <name>             a harness note of the broker in dir (sasl.bootstrap, ssl.truststore, ...)
 *   stop <dir> | kill <dir>       SIGTERM and wait / SIGKILL (dir of one node)
 *   create-topic <bootstrap> <topic> <partitions>
 *   delete-topic <bootstrap> <topic>   waits until the topic is gone
 *   earliest <bootstrap> <group>  set share.auto.offset.reset=earliest on the group
 *   group-config <bootstrap> <group> <key>=<value>...
 *   produce <bootstrap> <topic> <count> [valueBytes] [firstKey] [bulk]   bulk: 256 KB lz4 batches
 *   produce-rate <bootstrap> <topic> <perSecond> <seconds> [firstKey]   prints the count produced
 *   share-consume <bootstrap> <group> <topic> <expected> [timeoutMs]   prints the count received
 *   group-state <bootstrap> <group>   prints the share group's state as JSON
 *   read-topic <bootstrap> <topic>    prints every record (key, headers) as JSON lines
 * }}}
 * Needs -Dkafkashare.root=<project root> for the broker class paths.
 */
object HarnessCli {

  def main(args: Array[String]): Unit = {
    val exit = try { run(args.toList); 0 } catch {
      case e: IllegalArgumentException => System.err.println(e.getMessage); 2
      case e: Exception                => e.printStackTrace(); 1
    }
    System.exit(exit)
  }

  private def run(args: List[String]): Unit = args match {
    case List("start", version, dir) => println(KafkaBroker.start(version, Paths.get(dir)).bootstrapServers)
    case List("start", version, dir, "share-groups-off") =>
      println(KafkaBroker.start(version, Paths.get(dir), shareGroups = false).bootstrapServers)
    case List("start", version, dir, "secure") =>
      println(KafkaBroker.start(version, Paths.get(dir), secure = true).bootstrapServers)
    case List("start-cluster", version, dir, nodes) =>
      println(KafkaBroker.startCluster(version, Paths.get(dir), nodes.toInt).map(_.bootstrapServers).mkString(","))
    case List("note", dir, name) =>
      println(KafkaBroker.at(Paths.get(dir)).note(name).getOrElse(throw new IllegalArgumentException(s"no note $name in $dir")))
    case List("stop", dir)           => KafkaBroker.at(Paths.get(dir)).stop()
    case List("kill", dir)           => KafkaBroker.at(Paths.get(dir)).kill()
    case List("create-topic", bootstrap, topic, partitions) => new KafkaTestOps(bootstrap).createTopic(topic, partitions.toInt)
    case List("delete-topic", bootstrap, topic)             => new KafkaTestOps(bootstrap).deleteTopic(topic)
    case List("earliest", bootstrap, group)                 => new KafkaTestOps(bootstrap).readFromEarliest(group)
    case "group-config" :: bootstrap :: group :: settings if settings.nonEmpty =>
      new KafkaTestOps(bootstrap).setGroupConfig(group, settings.map { s =>
        s.split("=", 2) match {
          case Array(k, v) => k -> v
          case _           => throw new IllegalArgumentException(s"expected key=value, got $s")
        }
      }.toMap)
    case "produce" :: bootstrap :: topic :: count :: rest =>
      new KafkaTestOps(bootstrap).produce(topic, count.toInt, rest.headOption.map(_.toInt).getOrElse(100),
        rest.lift(1).map(_.toInt).getOrElse(0), bulk = rest.lift(2).contains("bulk"))
    case "produce-rate" :: bootstrap :: topic :: perSecond :: seconds :: rest =>
      println(new KafkaTestOps(bootstrap).produceAtRate(topic, perSecond.toInt, seconds.toInt, rest.headOption.map(_.toInt).getOrElse(0)))
    case "share-consume" :: bootstrap :: group :: topic :: expected :: rest =>
      val records = new KafkaTestOps(bootstrap).shareConsume(group, Seq(topic), expected.toInt, rest.headOption.map(_.toLong).getOrElse(60000L))
      println(records.size)
    case List("read-topic", bootstrap, topic) => new KafkaTestOps(bootstrap).readTopic(topic).foreach(println)
    case List("group-state", bootstrap, group) => println(new KafkaTestOps(bootstrap).shareGroupState(group).toJson)
    case _ => throw new IllegalArgumentException(s"unknown command: ${args.mkString(" ")}\nsee HarnessCli's scaladoc for usage")
  }
}
