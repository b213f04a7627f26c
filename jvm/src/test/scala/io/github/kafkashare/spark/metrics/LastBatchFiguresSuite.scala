package io.github.kafkashare.spark.metrics

import org.scalatest.funsuite.AnyFunSuite

class LastBatchFiguresSuite extends AnyFunSuite {

  test("every age falls in a bucket whose upper bound is at or above it and within a quarter of it") {
    val ages = (0L to 5000L) ++ Seq(65536L, 999999L, 86400000L, 1L << 40)
    ages.foreach { age =>
      val bound = AgeHistogram.upperBound(AgeHistogram.bucketOf(age))
      assert(bound >= age && bound <= math.max(age * 5 / 4, age + 1), s"age $age: bound $bound")
      if (age > 0) assert(AgeHistogram.upperBound(AgeHistogram.bucketOf(age) - 1) < age, s"age $age: the bucket below holds it")
    }
  }

  test("p99 of 990 young records and 10 old ones is a young one; of 980 and 20 an old one; never above the max") {
    def histogram(young: Int, old: Int): AgeHistogram = {
      val h = new AgeHistogram
      (1 to young).foreach(i => h.record(100 + i % 50))
      (1 to old).foreach(_ => h.record(60000))
      h
    }
    val mostlyYoung = histogram(990, 10)
    assert(mostlyYoung.quantile(0.99) >= 149 && mostlyYoung.quantile(0.99) <= 160)
    assert(mostlyYoung.max == 60000)
    assert(histogram(980, 20).quantile(0.99) == 60000, "clamped to the max, not the bucket's bound")
    assert(new AgeHistogram().quantile(0.99) == 0)
  }

  test("the accumulators merge the tasks' figures, copy without sharing, and reset to nothing") {
    val ages = new EmittedAgesAccumulator
    val task = new AgeHistogram
    task.record(10); task.record(2000)
    val copy = ages.copy()
    copy.add(task)
    assert(ages.isZero && !copy.isZero)
    ages.merge(copy)
    assert(ages.value.count == 2 && ages.value.max == 2000)
    ages.reset()
    assert(ages.isZero && ages.value.max == 0)

    val lock = new MaxAccumulator
    val t1   = lock.copy(); t1.add(30)
    val t2   = lock.copy(); t2.add(70)
    lock.merge(t1); lock.merge(t2)
    assert(lock.value == 70)
    lock.reset()
    assert(lock.isZero && lock.value == 0)
  }
}
