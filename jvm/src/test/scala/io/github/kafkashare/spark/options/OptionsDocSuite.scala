package io.github.kafkashare.spark.options

import java.nio.file.{Files, Paths}

import org.scalatest.funsuite.AnyFunSuite

class OptionsDocSuite extends AnyFunSuite {
  test("docs/reference/options.md is what the option declarations generate") {
    val file   = Paths.get(sys.props.getOrElse("kafkashare.root", ".."), "docs", "reference", "options.md")
    val onDisk = new String(Files.readAllBytes(file), "UTF-8")
    assert(
      onDisk == OptionsDoc.markdown,
      "docs/reference/options.md is out of date: build/sbt \"connector/runMain io.github.kafkashare.spark.options.OptionsDoc\""
    )
  }

  test("the Python package's options_spec.json is what the option declarations generate") {
    val file   = Paths.get(sys.props.getOrElse("kafkashare.root", ".."), OptionsDoc.SpecFile)
    val onDisk = new String(Files.readAllBytes(file), "UTF-8")
    assert(
      onDisk == OptionsDoc.spec,
      s"${OptionsDoc.SpecFile} is out of date: build/sbt \"connector/runMain io.github.kafkashare.spark.options.OptionsDoc\""
    )
  }

  test("every declared option is read by the parser: set to a value other than its default, it changes what is parsed") {
    import OptionDeclarations._
    import OptionKind._
    val base = Map(BootstrapServers -> "b:9092", GroupId -> "g", Subscribe -> "a")
    // What an option needs beside it to be accepted at all.
    val companions = Map(
      DefaultDecision -> Map(AckMode -> "explicit"),
      DeadLetterTopic -> Map(MaxDeliveries -> "3"),
      MinParallelism  -> Map(Parallelism -> "auto"),
      MaxParallelism  -> Map(Parallelism -> "auto"),
      BacklogDrainMs  -> Map(Parallelism -> "auto")
    )
    def otherValue(d: OptionDeclaration): String = d.kind match {
      case Choice(values)    => values.find(_ != d.default).get
      case Whole(min, _)     => (min + 7).toString
      case WholeOrAuto(_, _) => "auto"
      case Bool              => (!d.default.toBoolean).toString
      case Topic             => "dead-letters"
      case Topics            => "b,c"
      case Regex             => "orders.*"
      case Text              => s"${d.key}-value"
      case ClientSettings    => fail("no value for kafka.*")
    }
    val checked = all.filter(_.kind != ClientSettings).map { d =>
      val needed = base ++ companions.getOrElse(d.key, Map.empty)
      val before = ShareSourceOptions.parse(needed)
      // subscribePattern replaces subscribe: exactly one of them is allowed.
      val after = ShareSourceOptions.parse((if (d.key == SubscribePattern) needed - Subscribe else needed) + (d.key -> otherValue(d)))
      assert(after != before, s"${d.key}=${otherValue(d)} changed nothing: the parser does not read it")
      d.key
    }
    assert(checked.size >= 17, checked) // the declarations were found, not an empty list
  }
}
