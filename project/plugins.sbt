// The plugin version is pinned in versions.properties with every other pin.
val pluginPins = {
  val p = new java.util.Properties
  IO.load(
    p,
    file("versions.properties").getAbsoluteFile match {
      case f if f.exists => f
      case _             => file("../versions.properties")
    }
  )
  p
}
addSbtPlugin("com.eed3si9n" % "sbt-assembly" % pluginPins.getProperty("sbt-assembly"))
