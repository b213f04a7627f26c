package io.github.kafkashare.it.stream

import java.nio.file.Files
import java.util.regex.Pattern

import org.apache.spark.sql.streaming.Trigger

/**
 * Two-phase commit and explicit mode acknowledge a batch on the executors after Spark's commit log has
 * it (the commit watcher). A Trigger.AvailableNow query must end only after that phase 2 of its last
 * batch: a job that stops Spark when the query ends would otherwise leave the records locked by
 * executors that are gone, to come back to the group with a delivery attempt spent.
 *
 * The checkpoint is on a store whose look-ups of commit files take 1 s, so the watcher sees the last
 * commit well after Spark wrote it: a query that did not wait would end first. When the query has
 * ended, each task of its last batch must have marked phase 2 done (`acknowledged/<batch>/<task>`,
 * written by the watcher after it acknowledged).
 */
class PhaseTwoAtEndSuite extends ShareStreamTest {

  // (name, strategy, options)
  private val modes = Seq(
    ("two-phase-commit", "two-phase-commit", Seq.empty[(String, String)]),
    (
      "explicit mode, default accept",
      "checkpoint-dedup",
      Seq("kafka.share.acknowledgment.mode" -> "explicit", "kafka.share.acknowledgment.default" -> "accept")
    )
  )

  for ((name, strategy, options) <- modes)
    test(s"Trigger.AvailableNow with $name ends after phase 2 of its last batch") {
      val topic = prepare(lockMs = 30000) // the wait for phase 2 ends a lock after planning: room for the slow store
      val query = topic.queryOn(SlowLocalFileSystem.Scheme, strategy, options: _*)
      try
        testStream(query)(
          AddRecords(topic, 1000),
          Assert("a commit file of this query takes 1 s to look up") { q =>
            SlowStatus.slowDown((Pattern.quote(q.checkpoint.toUri.getPath.stripSuffix("/")) + "/commits/\\d+").r, 1000)
          },
          StartStream(Trigger.AvailableNow()),
          AwaitTermination(),
          Assert("every task of the last batch had acknowledged when the query ended") { q =>
            val last  = q.batchesWithRecords.last.batchId
            val tasks = q.sink.rowsOf(last).map(_.task).distinct
            assert(tasks.nonEmpty, s"batch $last landed no rows")
            val done    = q.checkpoint.resolve(s"sources/0/acknowledged/$last")
            val missing = tasks.filterNot(t => Files.exists(done.resolve(t.toString)))
            assert(missing.isEmpty, s"batch $last: tasks ${missing.mkString(", ")} had not acknowledged when the query ended")
            assert(q.sink.distinctKeys == 1000, q.describe)
          }
        )
      finally SlowStatus.reset()
    }
}
