package io.github.kafkashare.testkit

import java.io.{BufferedReader, InputStreamReader, PrintStream, PrintWriter, StringWriter}
import java.nio.charset.StandardCharsets
import java.nio.file.Paths

import scala.collection.mutable.ListBuffer

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
 *   serve                         runs the commands above one per line of standard input (see serve)
 * }}}
 * Needs -Dkafkashare.root=<project root> for the broker class paths.
 */
object HarnessCli {

  /** Ends every answer of `serve`, followed by the command's exit status (0, 1 or 2, as the CLI's). */
  val AnswerEnd = "@@harness-done"

  def main(args: Array[String]): Unit = args.toList match {
    case List("serve") => serve()
    case commandLine =>
      val (status, output) = runCaptured(commandLine)
      (if (status == 0) System.out else System.err).print(output)
      System.exit(status)
  }

  /**
   * One JVM for many commands: a JVM start and the Kafka clients' class loading cost about a second,
   * and the Python tests make hundreds of calls. Reads one command per line, its arguments separated by
   * tabs; answers with the command's output (or its error) and a line `@@harness-done <status>`.
   * Anything else that writes to standard output (a library's logging) goes to standard error, so
   * that it never mixes with the answers. Ends at the end of its input.
   */
  private def serve(): Unit = {
    val answers = new PrintStream(System.out, true, StandardCharsets.UTF_8)
    System.setOut(System.err)
    val requests = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))
    Iterator.continually(requests.readLine()).takeWhile(_ != null).foreach { line =>
      val (status, output) = runCaptured(if (line.isEmpty) Nil else line.split("\t", -1).toList)
      answers.print(output)
      if (output.nonEmpty && !output.endsWith("\n")) answers.println()
      answers.println(s"$AnswerEnd $status")
    }
    System.exit(0) // a thread a command left behind (a client still closing) must not keep the JVM up
  }

  /** Runs one command: its exit status and its output (on failure, the error's text). */
  private def runCaptured(args: List[String]): (Int, String) = {
    val lines = ListBuffer.empty[String]
    try { run(args, lines += _); (0, lines.map(_ + "\n").mkString) }
    catch {
      case e: IllegalArgumentException => (2, e.getMessage + "\n")
      case e: Throwable => // anything a command throws is its answer; the server goes on
        val trace = new StringWriter
        e.printStackTrace(new PrintWriter(trace))
        (1, trace.toString)
    }
  }

  private def run(args: List[String], println: String => Unit): Unit = args match {
    case List("start", version, dir) => println(KafkaBroker.start(version, Paths.get(dir)).bootstrapServers)
    case List("start", version, dir, "share-groups-off") =>
      println(KafkaBroker.start(version, Paths.get(dir), shareGroups = false).bootstrapServers)
    case List("start", version, dir, "secure") =>
      println(KafkaBroker.start(version, Paths.get(dir), secure = true).bootstrapServers)
    case List("start-cluster", version, dir, nodes) =>
      println(KafkaBroker.startCluster(version, Paths.get(dir), nodes.toInt).map(_.bootstrapServers).mkString(","))
    case List("note", dir, name) =>
      println(KafkaBroker.at(Paths.get(dir)).note(name).getOrElse(throw new IllegalArgumentException(s"no note $name in $dir")))
    case List("stop", dir)                                  => KafkaBroker.at(Paths.get(dir)).stop()
    case List("kill", dir)                                  => KafkaBroker.at(Paths.get(dir)).kill()
    case List("create-topic", bootstrap, topic, partitions) => new KafkaTestOps(bootstrap).createTopic(topic, partitions.toInt)
    case List("delete-topic", bootstrap, topic)             => new KafkaTestOps(bootstrap).deleteTopic(topic)
    case List("earliest", bootstrap, group)                 => new KafkaTestOps(bootstrap).readFromEarliest(group)
    case "group-config" :: bootstrap :: group :: settings if settings.nonEmpty =>
      new KafkaTestOps(bootstrap).setGroupConfig(
        group,
        settings.map { s =>
          s.split("=", 2) match {
            case Array(k, v) => k -> v
            case _           => throw new IllegalArgumentException(s"expected key=value, got $s")
          }
        }.toMap
      )
    case "produce" :: bootstrap :: topic :: count :: rest =>
      new KafkaTestOps(bootstrap).produce(
        topic,
        count.toInt,
        rest.headOption.map(_.toInt).getOrElse(100),
        rest.lift(1).map(_.toInt).getOrElse(0),
        bulk = rest.lift(2).contains("bulk")
      )
    case "produce-rate" :: bootstrap :: topic :: perSecond :: seconds :: rest =>
      println(new KafkaTestOps(bootstrap).produceAtRate(
        topic,
        perSecond.toInt,
        seconds.toInt,
        rest.headOption.map(_.toInt).getOrElse(0)
      ).toString)
    case "share-consume" :: bootstrap :: group :: topic :: expected :: rest =>
      val records =
        new KafkaTestOps(bootstrap).shareConsume(group, Seq(topic), expected.toInt, rest.headOption.map(_.toLong).getOrElse(60000L))
      println(records.size.toString)
    case List("read-topic", bootstrap, topic)  => new KafkaTestOps(bootstrap).readTopic(topic).foreach(println)
    case List("group-state", bootstrap, group) => println(new KafkaTestOps(bootstrap).shareGroupState(group).toJson)
    case _ => throw new IllegalArgumentException(s"unknown command: ${args.mkString(" ")}\nsee HarnessCli's scaladoc for usage")
  }
}
