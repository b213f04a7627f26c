package io.github.kafkashare.spark

/**
 * Every place where the source leans on Spark's internals rather than its public connector API: the
 * names, fields, classes and layouts that a Spark release may move without notice. Nothing else in the
 * connector names them (tests/python/test_source_layout.py checks). [[sparkinternals.SparkInternalsCheck]]
 * tries each on the Spark it runs in; the suites run it on every supported Spark line
 * (docs/internals/architecture.md, "Spark's internals the source touches").
 *
 * This package imports no other package of the connector.
 */
package object sparkinternals
