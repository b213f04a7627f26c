package io.github.kafkashare.spark.errors

import scala.jdk.CollectionConverters._

import com.fasterxml.jackson.databind.{JsonNode, ObjectMapper}

/**
 * The source's error conditions, read from error/kafka-share-error-conditions.json, in the format of
 * Spark's own catalogues (a condition, its message with `<parameter>`s, its SQLSTATE, and sub-conditions
 * named `MAIN.SUB`), plus a `help` text per condition that docs/reference/errors.md is generated from.
 * Read with Jackson rather than Spark's ErrorClassesJsonReader: that class is internal to Spark and
 * changed between the Spark lines the connector runs on.
 */
object ErrorCatalogue {
  val Resource = "error/kafka-share-error-conditions.json"

  /**
   * One condition as users see it: `MAIN` or `MAIN.SUB`. A sub-condition's message is its main
   * condition's sentence followed by its own.
   */
  final case class Condition(name: String, mainMessage: String, ownMessage: String, sqlState: String, help: String) {
    def messageTemplate: String = s"$mainMessage $ownMessage".trim

    /** The main condition: `MAIN` of `MAIN.SUB`. */
    def main: String = name.takeWhile(_ != '.')
  }

  lazy val conditions: Seq[Condition] = {
    val stream = Option(getClass.getClassLoader.getResourceAsStream(Resource))
      .getOrElse(throw new IllegalStateException(s"$Resource is missing from the connector's jar"))
    val root =
      try new ObjectMapper().readTree(stream)
      finally stream.close()
    def text(node: JsonNode, field: String): String =
      Option(node.get(field)).map(_.elements.asScala.map(_.asText).mkString("\n")).getOrElse("")
    root.fields.asScala.toSeq.flatMap { main =>
      val node     = main.getValue
      val sqlState = node.get("sqlState").asText
      Option(node.get("subClass")) match {
        case Some(subs) =>
          subs.fields.asScala.toSeq.map { sub =>
            Condition(
              s"${main.getKey}.${sub.getKey}",
              text(node, "message"),
              text(sub.getValue, "message"),
              sqlState,
              text(sub.getValue, "help")
            )
          }
        case None => Seq(Condition(main.getKey, "", text(node, "message"), sqlState, text(node, "help")))
      }
    }
  }

  private val Placeholder = "<([A-Za-z]+)>".r

  private lazy val byName = conditions.map(c => c.name -> c).toMap

  def apply(name: String): Condition =
    byName.getOrElse(name, throw new IllegalStateException(s"error condition $name is not in $Resource"))

  /** The message as Spark words its own errors: `[CONDITION] text SQLSTATE: xxxxx`. */
  def message(name: String, parameters: Map[String, String]): String = {
    val condition = apply(name)
    // One pass, so that a value holding `<name>` (a user's option value) is never substituted again.
    val text = Placeholder.replaceAllIn(
      condition.messageTemplate,
      m => java.util.regex.Matcher.quoteReplacement(parameters.getOrElse(m.group(1), m.matched))
    )
    s"[$name] $text SQLSTATE: ${condition.sqlState}"
  }
}
