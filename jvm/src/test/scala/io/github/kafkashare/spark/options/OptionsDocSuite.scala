package io.github.kafkashare.spark.options

import java.nio.file.{Files, Paths}

import org.scalatest.funsuite.AnyFunSuite

class OptionsDocSuite extends AnyFunSuite {
  test("docs/options.md is what the option declarations generate") {
    val file   = Paths.get(sys.props.getOrElse("kafkashare.root", ".."), "docs", "options.md")
    val onDisk = new String(Files.readAllBytes(file), "UTF-8")
    assert(
      onDisk == OptionsDoc.markdown,
      "docs/options.md is out of date: build/sbt \"connector/runMain io.github.kafkashare.spark.options.OptionsDoc\""
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

  test("every option the parser reads is declared") {
    val declared = OptionDeclarations.all.map(_.key).toSet
    Seq(
      OptionDeclarations.BootstrapServers,
      OptionDeclarations.GroupId,
      OptionDeclarations.Subscribe,
      OptionDeclarations.SubscribePattern,
      OptionDeclarations.AckMode,
      OptionDeclarations.Strategy,
      OptionDeclarations.Parallelism,
      OptionDeclarations.LockTimeoutMs,
      OptionDeclarations.IncludeHeaders,
      OptionDeclarations.MaxRecordsPerTrigger,
      OptionDeclarations.StartingOffsetsKey,
      OptionDeclarations.PollTimeoutMs,
      OptionDeclarations.FailOnDataLoss
    ).foreach(k => assert(declared.contains(k), k))
  }
}
