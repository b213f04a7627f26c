package io.github.kafkashare.spark.metrics

import org.apache.spark.util.AccumulatorV2

/**
 * How old records were when the read tasks emitted them (now minus the record's timestamp), in a small fixed
 * histogram: four buckets per power of two, so a quantile reads at most a quarter above the true value and a
 * task's histogram costs 160 longs, whatever it emitted. Not thread-safe: one per task, merged on the driver.
 */
final class AgeHistogram extends Serializable {
  import AgeHistogram._

  private val counts = new Array[Long](Buckets)
  private var n      = 0L
  private var maxMs  = 0L

  def count: Long = n
  def max: Long   = maxMs

  def record(ageMs: Long): Unit = {
    val age = math.max(0L, ageMs)
    counts(bucketOf(age)) += 1
    n += 1
    if (age > maxMs) maxMs = age
  }

  def add(other: AgeHistogram): Unit = {
    var i = 0
    while (i < Buckets) { counts(i) += other.counts(i); i += 1 }
    n += other.n
    maxMs = math.max(maxMs, other.maxMs)
  }

  /** The upper bound of the bucket that holds the q-quantile, never above the largest age seen; 0 when empty. */
  def quantile(q: Double): Long =
    if (n == 0) 0L
    else {
      val rank = math.max(1L, math.ceil(q * n).toLong)
      var seen = 0L
      var i    = 0
      while (seen + counts(i) < rank) { seen += counts(i); i += 1 }
      math.min(upperBound(i), maxMs)
    }

  def copy(): AgeHistogram = { val c = new AgeHistogram; c.add(this); c }
}

object AgeHistogram {
  // Ages 0..3 ms each have a bucket; from 4 on, four per power of two up to 2^41 ms (70 years), the last open.
  private[metrics] val Buckets = 4 + 40 * 4

  private[metrics] def bucketOf(ageMs: Long): Int =
    if (ageMs < 4) ageMs.toInt
    else {
      val power = 63 - java.lang.Long.numberOfLeadingZeros(ageMs) // 2^power <= age
      math.min(Buckets - 1, 4 + (power - 2) * 4 + ((ageMs >>> (power - 2)) & 3).toInt)
    }

  private[metrics] def upperBound(bucket: Int): Long =
    if (bucket < 4) bucket.toLong
    else if (bucket == Buckets - 1) Long.MaxValue
    else {
      val power = (bucket - 4) / 4 + 2
      ((5L + (bucket - 4) % 4) << (power - 2)) - 1
    }
}

/**
 * The emitted records' ages of one batch: the tasks' histograms, merged as they end. The driver reads the
 * value while tasks may still merge (a retried task), and resets it as the next batch is planned: synchronized.
 */
final class EmittedAgesAccumulator extends AccumulatorV2[AgeHistogram, AgeHistogram] {
  private var histogram = new AgeHistogram

  override def isZero: Boolean = synchronized(histogram.count == 0)
  override def copy(): EmittedAgesAccumulator = synchronized {
    val c = new EmittedAgesAccumulator
    c.histogram = histogram.copy()
    c
  }
  override def reset(): Unit                                                 = synchronized { histogram = new AgeHistogram }
  override def add(v: AgeHistogram): Unit                                    = synchronized(histogram.add(v))
  override def value: AgeHistogram                                           = synchronized(histogram.copy())
  override def merge(other: AccumulatorV2[AgeHistogram, AgeHistogram]): Unit = add(other.value)
}

/** The largest value any task added (lock used, in percent), reset per batch as [[EmittedAgesAccumulator]] is. */
final class MaxAccumulator extends AccumulatorV2[Long, Long] {
  private var largest = 0L
  private var added   = false

  override def isZero: Boolean = synchronized(!added)
  override def copy(): MaxAccumulator = synchronized {
    val c = new MaxAccumulator
    c.largest = largest
    c.added = added
    c
  }
  override def reset(): Unit = synchronized { largest = 0L; added = false }
  override def add(v: Long): Unit = synchronized {
    largest = math.max(largest, v)
    added = true
  }
  override def value: Long = synchronized(largest)
  override def merge(other: AccumulatorV2[Long, Long]): Unit = other match {
    case m: MaxAccumulator => if (!m.isZero) add(m.value)
    case _                 => add(other.value)
  }
}
