package io.github.kafkashare.spark.options

/**
 * Renders docs/reference/options.md and the Python package's options_spec.json from [[OptionDeclarations]]; unit
 * tests fail when either file drifts.
 */
object OptionsDoc {

  val SpecFile = "python/src/spark_kafka_share/options_spec.json"

  /** What the Python builder checks values by: one object per option, in declaration order. */
  def spec: String = {
    def str(v: String) = "\"" + v.flatMap {
      case '"'          => "\\\""
      case '\\'         => "\\\\"
      case c if c < ' ' => f"\\u${c.toInt}%04x"
      case c            => c.toString
    } + "\""
    val options = OptionDeclarations.all.map { o =>
      val kind = o.kind match {
        case OptionKind.Choice(values)        => s""""kind": "choice", "values": [${values.map(str).mkString(", ")}]"""
        case OptionKind.Whole(min, max)       => s""""kind": "whole", "min": $min, "max": $max"""
        case OptionKind.WholeOrAuto(min, max) => s""""kind": "whole-or-auto", "min": $min, "max": $max"""
        case k                                => s""""kind": ${str(k.name)}"""
      }
      s"""    {"key": ${str(o.key)}, "python": ${str(o.python)}, $kind, "default": ${str(o.default)}, "meaning": ${str(o.meaning)}}"""
    }
    s"""{\n  "generated_by": "build/sbt \\"connector/runMain io.github.kafkashare.spark.options.OptionsDoc\\"",\n  "options": [\n""" +
      options.mkString(",\n") + "\n  ]\n}\n"
  }

  /** The user's guide page that tells how to choose an option's value, linked from its row. */
  val GuidePages: Map[String, String] = Map(
    OptionDeclarations.Strategy -> "[Choosing a strategy](../guide/strategies.md)",
    OptionDeclarations.AckMode  -> "[Explicit acknowledgement](../guide/explicit-mode.md)"
  )

  def markdown: String = {
    val rows = OptionDeclarations.all.map { o =>
      val meaning = o.meaning + GuidePages.get(o.key).fold("")(link => s" $link.")
      s"| `${o.key}` | ${values(o.kind)} | ${if (o.default.isEmpty) "" else s"`${o.default}`"} | $meaning |"
    }
    def insteadRows(options: Map[String, String], prefix: String) =
      Seq("| option | instead |", "|---|---|") ++
        options.toSeq.sortBy(_._1).map { case (k, instead) => s"| `$prefix$k` | $instead |" }
    (Seq(
      "# Options of the kafka-share source",
      "",
      "Generated from `OptionDeclarations.scala`, as is the Python builder's `options_spec.json` (run",
      "`build/sbt \"connector/runMain io.github.kafkashare.spark.options.OptionsDoc\"`);",
      "a unit test fails when this file and the code disagree. Option names are case-insensitive; a key that is",
      "neither one of these nor a Kafka client setting (`kafka.<setting>`; `kafka.share.*` names belong to the source) is",
      "an error, with the nearest name suggested.",
      "",
      "| option | values | default | meaning |",
      "|---|---|---|---|"
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

  private def values(kind: OptionKind): String = kind match {
    case OptionKind.Choice(values)                          => values.map(v => s"`$v`").mkString(", ")
    case OptionKind.Whole(min, max) if max == Long.MaxValue => s"a whole number, at least $min"
    case OptionKind.Whole(min, max)                         => s"a whole number, $min to $max"
    case OptionKind.WholeOrAuto(min, max)                   => s"`auto`, or a whole number, $min to $max"
    case OptionKind.Bool                                    => "`true`, `false`"
    case OptionKind.Topic                                   => "a topic name"
    case OptionKind.Topics                                  => "topic names, comma-separated"
    case OptionKind.Regex                                   => "a Java regex"
    case OptionKind.Text                                    => "text"
    case OptionKind.ClientSettings                          => "`kafka.<setting>`"
  }

  def main(args: Array[String]): Unit =
    Seq("docs/reference/options.md" -> markdown, SpecFile -> spec).foreach { case (file, text) =>
      val target = java.nio.file.Paths.get(file)
      java.nio.file.Files.write(target, text.getBytes("UTF-8"))
      println(s"wrote $target")
    }
}
