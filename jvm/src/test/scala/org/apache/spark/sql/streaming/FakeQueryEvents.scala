package org.apache.spark.sql.streaming

import java.util.UUID

import scala.jdk.CollectionConverters._

/** Spark's progress classes have package-private constructors: the monitoring suites build their events here. */
object FakeQueryEvents {

  def progress(id: UUID, name: String, sources: (String, Map[String, String])*): StreamingQueryListener.QueryProgressEvent =
    new StreamingQueryListener.QueryProgressEvent(
      new StreamingQueryProgress(
        id,
        UUID.randomUUID(),
        name,
        "2026-12-02T00:00:00.000Z",
        1L,
        0L,
        Map.empty[String, java.lang.Long].asJava,
        Map.empty[String, String].asJava,
        Array.empty,
        sources.map { case (description, metrics) =>
          new SourceProgress(description, "{}", "{}", "{}", 0L, 0.0, 0.0, metrics.asJava)
        }.toArray,
        new SinkProgress("sink"),
        Map.empty[String, org.apache.spark.sql.Row].asJava
      )
    )

  def terminated(id: UUID): StreamingQueryListener.QueryTerminatedEvent =
    new StreamingQueryListener.QueryTerminatedEvent(id, UUID.randomUUID(), None)
}
