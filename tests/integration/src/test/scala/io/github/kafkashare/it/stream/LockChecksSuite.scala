package io.github.kafkashare.it.stream

import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.Files
import java.util.regex.Pattern

import scala.jdk.CollectionConverters._

/**
 * A record is pinned only while its lock has time left: the age is checked right after the poll and
 * again right before the pin, because the steps between (reading the sibling tasks' pins, a dead-letter
 * send, a slow store) can outlast the lock. Pinned under a lock that ran out, a record may be acquired
 * by another member meanwhile and read twice.
 */
class LockChecksSuite extends ShareStreamTest {

  test("records whose lock ran low during the steps before pinning go back to the group, and land once") {
    val topic = prepare() // 15 s locks; two-phase-commit pins a record only until 60% of its lock: 9 s
    testStream(topic.queryOn(SlowLocalFileSystem.Scheme, "two-phase-commit"))(
      AddRecords(topic, 500),
      Assert("the next listing of a batch's acquisition folder (a task reading its siblings' pins) takes 11 s") { q =>
        // This query's folders only: other suites' queries on slowfs: run in the same JVM meanwhile.
        val own = Pattern.quote(q.checkpoint.toUri.getPath.stripSuffix("/"))
        SlowListings.slowDownNextListing(s"$own/.*acquisitions/\\d+".r, 11000)
      },
      StartStream(),
      CheckLanded(500),
      Assert("the slowed task gave its records back instead of pinning them") { q =>
        assert(!SlowListings.pending, "no task listed its siblings' pins: the test did not slow anything down")
        val released = q.progress.flatMap(_.sources.headOption).flatMap(_.metrics.asScala.get("recordsReleasedTotal"))
        assert(released.map(_.toLong).maxOption.exists(_ > 0), s"recordsReleasedTotal over the batches: $released")
        // Records also go back at the check right after a poll (a client buffer that aged): the warning
        // of the check before pinning says that this one did it. No other test stalls a task that long.
        val log = new String(Files.readAllBytes(TestDirs.connectorLog), UTF_8)
        assert(log.contains("lock to pin after the checks before pinning"), s"no such warning in ${TestDirs.connectorLog}")
      }
    )
  }
}
