package io.github.kafkashare.spark.errors

import java.nio.file.{Files, Path, Paths}

/**
 * Renders the errors part of docs/reference/errors.md from the catalogue ([[ErrorCatalogue]]), between
 * two marker lines; the rest of the file (the introduction, the warnings, the symptoms) is written by
 * hand. A unit test fails when the file drifts. Run:
 * `build/sbt "connector/Test/runMain io.github.kafkashare.spark.errors.ErrorsDoc"` (the test class path
 * has Jackson, which Spark provides at run time).
 */
object ErrorsDoc {
  val File  = "docs/reference/errors.md"
  val Begin = "<!-- errors: generated from jvm/src/main/resources/error/kafka-share-error-conditions.json by ErrorsDoc -->"
  val End   = "<!-- end of the generated errors -->"

  def errorsMarkdown: String = {
    val byMain = ErrorCatalogue.conditions.groupBy(_.main)
    ErrorCatalogue.conditions.map(_.main).distinct.flatMap { main =>
      val conditions = byMain(main)
      val first      = conditions.head
      val intro      = if (first.mainMessage.isEmpty) "" else s" Every message starts: \"${first.mainMessage}\""
      val heading    = Seq(s"## $main", "", s"SQLSTATE `${first.sqlState}`.$intro", "")
      heading ++ conditions.flatMap { c =>
        val sub = if (c.name == main) Nil else Seq(s"### ${c.name}", "")
        // `<parameter>` would be read as an HTML tag and dropped by Markdown renderers.
        sub ++ Seq(s"> ${c.ownMessage.replace("\n", " ").replace("<", "&lt;")}", "", c.help, "")
      }
    }.mkString("\n")
  }

  /** The file with its generated part replaced. */
  def render(current: String): String = {
    val begin = current.indexOf(Begin)
    val end   = current.indexOf(End)
    require(begin >= 0 && end > begin, s"$File has lost its marker lines ($Begin ... $End)")
    current.substring(0, begin + Begin.length) + "\n\n" + errorsMarkdown + "\n" + current.substring(end)
  }

  def main(args: Array[String]): Unit = {
    // Forked test runs start in jvm/ and name the project root in kafkashare.root.
    val file: Path = Paths.get(sys.props.getOrElse("kafkashare.root", "."), File)
    Files.write(file, render(new String(Files.readAllBytes(file), "UTF-8")).getBytes("UTF-8"))
    println(s"wrote $file")
  }
}
