package io.github.kafkashare.spark.offsets.store

import java.io.{IOException, InterruptedIOException, UncheckedIOException}
import java.lang.reflect.{InvocationTargetException, Method}
import java.nio.charset.StandardCharsets.UTF_8
import java.util.UUID

import scala.util.control.NonFatal

import org.apache.hadoop.fs.{FileAlreadyExistsException, FileSystem, Path}
import org.apache.hadoop.fs.store.audit.{AuditSpan, AuditSpanSource}
import org.slf4j.LoggerFactory

/**
 * S3's conditional write (one PUT with `If-None-Match: *`, which S3 refuses with 412 when the key
 * exists) through the S3 client of an S3A file system whose Hadoop does not offer it itself: S3A
 * before Hadoop 3.4.2, which Spark 4.0 ships. Later S3A has it behind `createFile` and
 * `fs.option.create.conditional.overwrite`, which [[HadoopCheckpointStore]] prefers.
 *
 * The request comes from S3A's own request factory, so the bucket's encryption, ACL and storage class
 * settings apply as to S3A's own writes; only the header is added; and it is sent inside an S3A audit
 * span, as S3A's own requests are. Everything but the span is reached by reflection: the connector
 * does not compile against hadoop-aws or the AWS SDK, which are on the class path only where S3A is
 * used. [[of]] looks every method up first and tries the write once on the store (an S3-compatible
 * store may ignore the header); it gives nothing when either fails, so that the store falls back to
 * the rename and the driver warns.
 */
private[store] final class S3ConditionalPut private (fs: FileSystem, calls: S3ConditionalPut.Calls) {
  import S3ConditionalPut._

  /** Writes `bytes` to `path` unless an object is there; a FileAlreadyExistsException when one is. */
  def putIfAbsent(path: Path, bytes: Array[Byte]): Unit = {
    val span = fs.asInstanceOf[AuditSpanSource[_ <: AuditSpan]].createSpan("op_create", path.toString, null)
    try {
      val client = call(calls.s3Client, call(calls.internals, fs), "kafka-share checkpoint: conditional write")
      if (client == null) throw new IOException(s"the S3A file system of $path is closed")
      val key = call(calls.pathToKey, fs, path)
      val builder = call(
        calls.newPut,
        call(calls.requestFactory, fs),
        key,
        call(calls.keepingDirs, null),
        Long.box(bytes.length.toLong),
        Boolean.box(false)
      )
      // S3A's builder already carries an override configuration (its request timeout): extend it.
      val existing  = call(calls.overrideGet, builder)
      val overrides = if (existing == null) call(calls.overridesBuilder, null) else call(calls.overridesToBuilder, existing)
      call(calls.putHeader, overrides, "If-None-Match", "*")
      call(calls.overrideSet, builder, call(calls.overridesBuild, overrides))
      val request = call(calls.build, builder)
      val body    = call(calls.fromBytes, null, bytes)
      var attempt = 1
      while (!send(path, client, request, body, attempt)) attempt += 1
    } finally span.close()
  }

  // True when written; false to try again (409: another conditional write of the key in flight).
  private def send(path: Path, client: AnyRef, request: AnyRef, body: AnyRef, attempt: Int): Boolean =
    try { calls.putObject.invoke(client, request, body); true }
    catch {
      case e: InvocationTargetException =>
        statusOf(e.getCause) match {
          case Some(PreconditionFailed) => throw new FileAlreadyExistsException(s"$path exists (S3 refused the write: 412)")
          case Some(Conflict) if attempt < ConflictAttempts =>
            try Thread.sleep(100L * attempt)
            catch { case _: InterruptedException => throw new InterruptedIOException(s"interrupted writing $path") }
            false
          case status => throw asIOException(e, s"conditional write of $path failed (HTTP status ${status.getOrElse("none")})")
        }
    }
}

private[store] object S3ConditionalPut {

  private val log = LoggerFactory.getLogger(classOf[S3ConditionalPut])

  /** Hadoop's switch for S3A's conditional write (3.4.2 and later); honoured here too, to turn it off. */
  val EnabledConf = "fs.s3a.create.conditional.enabled"

  private val S3AClassName       = "org.apache.hadoop.fs.s3a.S3AFileSystem"
  private val PreconditionFailed = 412
  private val Conflict           = 409
  private val ConflictAttempts   = 5

  /** The S3A and AWS SDK methods the write needs, looked up once, each on a public class or interface. */
  private final case class Calls(
      internals: Method,
      s3Client: Method,
      pathToKey: Method,
      requestFactory: Method,
      newPut: Method,
      keepingDirs: Method,
      overrideGet: Method,
      overrideSet: Method,
      overridesBuilder: Method,
      overridesToBuilder: Method,
      putHeader: Method,
      overridesBuild: Method,
      build: Method,
      fromBytes: Method,
      putObject: Method
  )

  /**
   * The conditional write through `fs`'s S3 client, when `fs` is S3A with the methods it needs, the
   * write is not switched off, and the store answers a second write of one key with 412 (tried once,
   * on a key of its own beside `near`).
   */
  def of(fs: FileSystem, near: Path): Option[S3ConditionalPut] =
    for {
      s3a <- s3aClass(fs.getClass) if fs.getConf.getBoolean(EnabledConf, true)
      put <- lookUp(fs, s3a) if refusesSecondWrite(put, fs, near)
    } yield put

  private def lookUp(fs: FileSystem, s3a: Class[_]): Option[S3ConditionalPut] =
    try {
      val loader                      = s3a.getClassLoader
      def cls(name: String): Class[_] = Class.forName(name, false, loader)
      val internals                   = cls("org.apache.hadoop.fs.s3a.S3AInternals")
      val factory                     = cls("org.apache.hadoop.fs.s3a.api.RequestFactory")
      val options                     = cls("org.apache.hadoop.fs.s3a.impl.PutObjectOptions")
      val putBuilder                  = cls("software.amazon.awssdk.services.s3.model.PutObjectRequest$Builder")
      val overrides                   = cls("software.amazon.awssdk.awscore.AwsRequestOverrideConfiguration")
      val overridesBuild              = cls("software.amazon.awssdk.awscore.AwsRequestOverrideConfiguration$Builder")
      val putRequest                  = cls("software.amazon.awssdk.services.s3.model.PutObjectRequest")
      val requestBody                 = cls("software.amazon.awssdk.core.sync.RequestBody")
      val calls = Calls(
        internals = s3a.getMethod("getS3AInternals"),
        s3Client = internals.getMethod("getAmazonS3Client", classOf[String]),
        pathToKey = s3a.getMethod("pathToKey", classOf[Path]),
        requestFactory = s3a.getMethod("getRequestFactory"),
        newPut = factory.getMethod("newPutObjectRequestBuilder", classOf[String], options, classOf[Long], classOf[Boolean]),
        keepingDirs = options.getMethod("keepingDirs"),
        overrideGet = putBuilder.getMethod("overrideConfiguration"),
        overrideSet = putBuilder.getMethod("overrideConfiguration", overrides),
        overridesBuilder = overrides.getMethod("builder"),
        overridesToBuilder = overrides.getMethod("toBuilder"),
        putHeader = overridesBuild.getMethod("putHeader", classOf[String], classOf[String]),
        overridesBuild = overridesBuild.getMethod("build"),
        build = putBuilder.getMethod("build"),
        fromBytes = requestBody.getMethod("fromBytes", classOf[Array[Byte]]),
        putObject = cls("software.amazon.awssdk.services.s3.S3Client").getMethod("putObject", putRequest, requestBody)
      )
      Some(new S3ConditionalPut(fs, calls))
    } catch {
      case e @ (_: ReflectiveOperationException | _: LinkageError) =>
        log.debug(s"kafka-share: S3A's client cannot make a conditional write here (${e.getMessage}); rename instead", e)
        None
    }

  // Written twice: a store that honours If-None-Match refuses the second write. The probe is a sibling
  // of `near` whose name is no batch number, not a child: `near` may be a file (a commit log entry),
  // and S3A's delete leaves a directory marker for the parent it empties.
  private def refusesSecondWrite(put: S3ConditionalPut, fs: FileSystem, near: Path): Boolean = {
    val probe =
      new Path(Option(near.getParent).getOrElse(near), s"${near.getName}.kafka-share-conditional-write-probe-${UUID.randomUUID()}")
    val bytes = "probe".getBytes(UTF_8)
    try {
      put.putIfAbsent(probe, bytes)
      try {
        put.putIfAbsent(probe, bytes)
        log.warn(s"kafka-share: $probe was written twice: the store ignores If-None-Match; the source's logs are written by rename")
        false
      } catch { case _: FileAlreadyExistsException => true }
    } catch {
      case NonFatal(e) =>
        log.warn(s"kafka-share: the store of $near refused a conditional write ($e); the source's logs are written by rename")
        false
    } finally
      try fs.delete(probe, false)
      catch { case NonFatal(_) => }
  }

  /** S3AFileSystem, when `c` is it or a subclass of it (a vendor's), without loading S3A where it is not used. */
  private def s3aClass(c: Class[_]): Option[Class[_]] =
    if (c == null) None else if (c.getName == S3AClassName) Some(c) else s3aClass(c.getSuperclass)

  // A reflective call whose failures come out as S3A's own would: IOExceptions.
  private def call(method: Method, target: AnyRef, args: AnyRef*): AnyRef =
    try method.invoke(target, args: _*)
    catch {
      case e: InvocationTargetException    => throw asIOException(e, s"${method.getName} failed")
      case e: ReflectiveOperationException => throw new IOException(s"${method.getName} failed: $e", e)
    }

  private def asIOException(e: InvocationTargetException, what: String): Throwable = e.getCause match {
    case io: IOException                 => io
    case unchecked: UncheckedIOException => unchecked.getCause
    case error: Error                    => error
    case other                           => new IOException(s"$what: $other", other)
  }

  private def statusOf(e: Throwable): Option[Int] =
    try Some(e.getClass.getMethod("statusCode").invoke(e).asInstanceOf[Int])
    catch { case NonFatal(_) => None }
}
