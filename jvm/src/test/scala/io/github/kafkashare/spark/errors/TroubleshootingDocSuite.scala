package io.github.kafkashare.spark.errors

import java.lang.reflect.Modifier
import java.nio.file.{Files, Paths}

import org.apache.spark.SparkThrowable
import org.scalatest.funsuite.AnyFunSuite

class TroubleshootingDocSuite extends AnyFunSuite {

  private val factories = ShareSourceErrors.getClass.getDeclaredMethods.toSeq
    .filter(m => Modifier.isPublic(m.getModifiers) && m.getReturnType == classOf[ShareSourceException])

  /** Each factory called with stand-in arguments of its parameter types. */
  private lazy val raised: Seq[(String, ShareSourceException)] = factories.map { m =>
    val args = m.getParameterTypes.toSeq.map {
      case c if c == classOf[String]                   => "x"
      case c if c == classOf[Int]                      => Int.box(7)
      case c if c == classOf[Long]                     => Long.box(7L)
      case c if c == classOf[Seq[_]]                   => Seq("t")
      case c if c == classOf[Option[_]]                => Some("y")
      case c if classOf[Throwable].isAssignableFrom(c) => new RuntimeException("cause")
      case c                                           => fail(s"${m.getName}: no stand-in for a parameter of type $c")
    }
    m.getName -> m.invoke(ShareSourceErrors, args: _*).asInstanceOf[ShareSourceException]
  }

  test("docs/reference/errors.md is what the error catalogue generates") {
    val file   = Paths.get(sys.props.getOrElse("kafkashare.root", ".."), ErrorsDoc.File)
    val onDisk = new String(Files.readAllBytes(file), "UTF-8")
    assert(
      onDisk == ErrorsDoc.render(onDisk),
      s"${ErrorsDoc.File} is out of date: build/sbt \"connector/Test/runMain io.github.kafkashare.spark.errors.ErrorsDoc\""
    )
  }

  test("every error of the source is a Spark error with a condition of the catalogue, and fills its message") {
    assert(raised.size >= 30, raised.map(_._1)) // the reflection found the factories, not nothing
    raised.foreach { case (factory, e) =>
      val condition = ErrorCatalogue(e.getCondition) // fails when the catalogue lacks it
      assert(e.isInstanceOf[SparkThrowable] && e.getSqlState == condition.sqlState && e.getSqlState.length == 5, factory)
      val placeholders = "<([A-Za-z]+)>".r.findAllMatchIn(condition.messageTemplate).map(_.group(1)).toSet
      assert(placeholders == e.parameters.keySet, s"$factory: the template names $placeholders, the factory gives ${e.parameters.keySet}")
      assert(e.getMessage.startsWith(s"[${e.getCondition}] ") && e.getMessage.endsWith(s" SQLSTATE: ${condition.sqlState}"), e.getMessage)
      assert(!e.getMessage.contains("<"), s"$factory left a placeholder: ${e.getMessage}")
    }
  }

  test("every condition of the catalogue is raised by some error of the source") {
    val used    = raised.map(_._2.getCondition).toSet
    val orphans = ErrorCatalogue.conditions.map(_.name).filterNot(used)
    assert(orphans.isEmpty, s"conditions no error raises: $orphans")
  }

  test("mistakes in how a query is set up are IllegalArgumentExceptions, the rest IllegalStateExceptions") {
    val byFactory = raised.toMap
    assert(byFactory("missingOption").isInstanceOf[IllegalArgumentException])
    assert(byFactory("unknownDecision").isInstanceOf[IllegalArgumentException])
    assert(byFactory("dataLost").isInstanceOf[IllegalStateException])
    assert(byFactory("missingTopics").isInstanceOf[IllegalStateException])
  }

  test("a value holding a parameter's name is not substituted again") {
    val e = ShareSourceErrors.invalidValue("kafka.share.parallelism", "<expected>", "a whole number")
    assert(e.getMessage.contains("the invalid value '<expected>'; expected a whole number"), e.getMessage)
  }
}
