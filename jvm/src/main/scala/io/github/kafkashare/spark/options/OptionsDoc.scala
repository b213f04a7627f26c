package io.github.kafkashare.spark.options

/** Renders docs/options.md from [[OptionDeclarations]]; a unit test fails when the file drifts. */
object OptionsDoc {

  def markdown: String = {
    val rows = OptionDeclarations.all.map { o =>
      s"| `${o.key}` | ${if (o.default.isEmpty) "" else s"`${o.default}`"} | ${o.meaning} |"
    }
    def insteadRows(options: Map[String, String], prefix: String) =
      Seq("| option | instead |", "|---|---|") ++
        options.toSeq.sortBy(_._1).map { case (k, instead) => s"| `$prefix$k` | $instead |" }
    (Seq(
      "# Options of the kafka-share source",
      "",
      "Generated from `OptionDeclarations.scala` (run `build/sbt \"connector/runMain io.github.kafkashare.spark.options.OptionsDoc\"`);",
      "a unit test fails when this file and the code disagree. Option names are case-insensitive; a key that is",
      "neither one of these nor a Kafka client setting (`kafka.<setting>`; `kafka.share.*` names belong to the source) is",
      "an error, with the nearest name suggested.",
      "",
      "| option | default | meaning |",
      "|---|---|---|"
    ) ++ rows ++ Seq(
      "",
      "## Kafka client settings the source refuses",
      "A share consumer rejects these, or the source owns them. Each error names what to use instead:",
      ""
    ) ++ insteadRows(OptionDeclarations.RefusedKafkaOptions, "kafka.") ++ Seq(
      "",
      "## Options of Spark's built-in Kafka source",
      "They mean nothing to a share group; each is an error that names what to use instead:",
      ""
    ) ++ insteadRows(OptionDeclarations.BuiltInKafkaSourceOptions, "")).mkString("", "\n", "\n")
  }

  def main(args: Array[String]): Unit = {
    val target = java.nio.file.Paths.get(args.headOption.getOrElse("docs/options.md"))
    java.nio.file.Files.write(target, markdown.getBytes("UTF-8"))
    println(s"wrote $target")
  }
}
