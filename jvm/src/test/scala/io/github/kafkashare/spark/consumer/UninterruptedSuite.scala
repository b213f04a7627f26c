package io.github.kafkashare.spark.consumer

import org.scalatest.funsuite.AnyFunSuite

class UninterruptedSuite extends AnyFunSuite {

  test("the body runs with the interrupt flag cleared, and the flag is set again after it") {
    Thread.currentThread.interrupt()
    val inside = Uninterrupted(Thread.currentThread.isInterrupted)
    assert(!inside)
    assert(Thread.interrupted(), "the interrupt is kept for the thread's own work")
  }

  test("an interrupt that comes during the body is kept too; none is made up") {
    Uninterrupted(Thread.currentThread.interrupt())
    assert(Thread.interrupted())
    Uninterrupted(())
    assert(!Thread.currentThread.isInterrupted)
  }
}
