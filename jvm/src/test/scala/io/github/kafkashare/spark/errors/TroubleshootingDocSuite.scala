package io.github.kafkashare.spark.errors

import java.lang.reflect.Modifier
import java.nio.file.{Files, Paths}

import org.scalatest.funsuite.AnyFunSuite

class TroubleshootingDocSuite extends AnyFunSuite {
  test("docs/troubleshooting.md explains every error the source can raise") {
    val doc = new String(
      Files.readAllBytes(
        Paths.get(sys.props.getOrElse("kafkashare.root", ".."), "docs", "troubleshooting.md")
      ),
      "UTF-8"
    )
    val factories = ShareSourceErrors.getClass.getDeclaredMethods.toSeq
      .filter(m => Modifier.isPublic(m.getModifiers) && m.getReturnType == classOf[ShareSourceException])
      .map(_.getName).distinct
    assert(factories.size >= 20, factories) // the reflection found the factories, not nothing
    val missing = factories.filterNot(name => doc.contains(s"[$name]"))
    assert(missing.isEmpty, s"docs/troubleshooting.md has no section for: ${missing.mkString(", ")}")
  }
}
