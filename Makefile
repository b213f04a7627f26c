# Two commands do all the set-up on a fresh machine (Java 17, Maven, Python 3 and make are enough):
#   make demo   builds what it needs, starts an embedded Kafka broker, runs a kafka-share query on it
#   make test   builds the jar and the wheel, runs the Scala and Python tests against real brokers
# Everything else is fetched: sbt from Maven Central (build/sbt), Kafka brokers from Maven Central,
# pyspark and the Python tools from PyPI into .venv/. Versions: versions.properties.

include versions.properties

SBT     := build/sbt
VENV    := .venv
VENV_OLDEST := .venv-spark-oldest
VENV_BETWEEN := .venv-spark-between
PY      := $(VENV)/bin/python
JAR     := jvm/target/scala-2.13/spark-kafka-share_2.13-$(project.version).jar
PKG     := python/src/spark_kafka_share
WHEEL   := dist/spark_kafka_share-$(project.version)-py3-none-any.whl
HARNESS := target/harness.classpath
DELTA_JARS := target/delta/classpath
# Hadoop's S3A and the AWS SDK modules it uses, for the checkpoint-on-S3 tests (tests/python/object_store.py).
S3_JARS    := target/s3/jars
# Hadoop's GCS connector and a GCS emulator, for the checkpoint-on-GCS test (tests/python/object_store.py).
GCS        := target/gcs/ready
# Class-data-sharing archives of each virtualenv's Spark classes, for the tests' Spark JVMs (tests/python/spark_runs.py).
SPARK_CLASSES        := target/spark-cds/$(VENV).jsa
SPARK_CLASSES_OLDEST := target/spark-cds/$(VENV_OLDEST).jsa
# A Maven repository holding the connector (jar, sources, pom), for `spark-submit --packages` tests.
MAVEN_REPO := target/maven-repo/io/github/kafkashare/spark-kafka-share_2.13/$(project.version)
# What `make release` signs (docs/internals/releasing.md): the Maven layout that Central takes (jar, sources and Scaladoc jars,
# POM), unsigned, written by sbt; the wheel and the sdist for PyPI. build/release.py turns it into target/release/.
RELEASE_STAGE := target/release-stage
RELEASE_MAVEN := $(RELEASE_STAGE)/maven.staged
RELEASE_PYPI  := $(RELEASE_STAGE)/pypi.staged
SDIST   := $(RELEASE_STAGE)/pypi/spark_kafka_share-$(project.version).tar.gz

JVM_SOURCES     := build.sbt versions.properties project/plugins.sbt $(shell find jvm/src jvm/realtime/src -type f 2>/dev/null)
HARNESS_SOURCES := build.sbt versions.properties $(shell find tests/harness/src -type f 2>/dev/null)
PY_SOURCES      := python/pyproject.toml python/README.md LICENSE NOTICE $(shell find $(PKG) -name '*.py' -o -name py.typed -o -name options_spec.json 2>/dev/null | grep -v _version.py)

.PHONY: demo test test-setup test-jvm test-python test-compat typecheck lint format build wheel publish release bench bench-scaling bench-latency bench-latency-profile bench-profile bench-cost metrics-picture backlog-picture chaos crash-series longrun clean

demo: $(VENV)/installed-wheel
	$(PY) python/examples/demo.py

# Scala first (unit and integration suites, one sbt start that also builds the jar), then Python,
# then a compatibility subset on the oldest supported Spark. While the Scala suites run, test-setup
# downloads and installs what the Python suites need and the jar does not (virtualenvs, Delta's jars,
# the GCS emulator), at the lowest CPU and disk priority: the suites keep the cores, the setup gets what
# they leave while they wait. Ctrl-C stops both.
test:
	@mkdir -p target && : > target/test-timings.txt
	@$$(command -v ionice >/dev/null && echo ionice -c3) nice -n 19 $(MAKE) --no-print-directory timed-test-setup \
		> target/test-setup.log 2>&1 & setup=$$!; \
		trap 'kill $$setup 2>/dev/null; exit 130' INT TERM; \
		$(MAKE) --no-print-directory timed-test-jvm; jvm=$$?; \
		wait $$setup || { echo "make test-setup failed (target/test-setup.log):"; tail -40 target/test-setup.log; exit 1; }; \
		[ $$jvm -eq 0 ] || exit $$jvm
	@$(MAKE) --no-print-directory timed-test-python timed-test-compat
	@echo "make test: minutes per suite (target/test-timings.txt; test-setup ran beside test-jvm)"; cat target/test-timings.txt

# No sbt here: test-jvm's sbt fetches the rest (two sbt clients in one build would wait on each other).
test-setup: $(VENV)/installed-tools $(VENV_OLDEST)/installed-runtime $(VENV_BETWEEN)/installed-runtime $(DELTA_JARS) $(GCS) $(SPARK_CLASSES) $(SPARK_CLASSES_OLDEST)

# Runs the target after `timed-` and notes its wall-clock time in target/test-timings.txt.
timed-%:
	@start=$$(date +%s); $(MAKE) --no-print-directory $*; status=$$?; \
		elapsed=$$(( $$(date +%s) - start )); \
		printf '%-12s %3d min %02d s%s\n' $* $$((elapsed / 60)) $$((elapsed % 60)) "$$( [ $$status -eq 0 ] || echo '  (failed)')" >> target/test-timings.txt; \
		exit $$status

test-jvm:
	$(SBT) fetchScalafmt connector/test connector/assembly connector/publish connector/releaseStage harness/exportHarnessClasspath harness/fetchBenchTools harness/fetchS3Jars integration/test realTimeIntegration/test
	@touch $(MAVEN_REPO) $(RELEASE_MAVEN)

# Two workers, one per core: the Spark and broker JVMs of one test keep a core busy (docs/internals/testing.md).
test-python: $(VENV)/installed-wheel $(VENV)/installed-tools $(SPARK_CLASSES) target/bench/tools.classpath $(S3_JARS) $(GCS) $(MAVEN_REPO) $(RELEASE_MAVEN) $(RELEASE_PYPI) typecheck lint
	$(PY) -m pytest -n 2 --dist loadgroup --durations=20 --junitxml=target/test-results/pytest.xml -m "not long" tests/python \
		--ignore=tests/python/test_delta_sink.py

# Throughput against Kafka's share consumer tool and Spark's own Kafka source (docs/internals/performance.md).
# Parameters: make bench BENCH_ARGS="--records 500000 --partitions 4 --parallelism 4"
bench: $(VENV)/installed-wheel $(VENV)/installed-tools target/bench/tools.classpath
	$(PY) tests/bench/bench.py $(BENCH_ARGS)

# Parallelism past the partition count, with 1 ms of blocking work per record (docs/internals/performance.md,
# docs/guide/scaling.md): make bench-scaling SCALING_ARGS="--records 30000"
bench-scaling: $(VENV)/installed-wheel $(VENV)/installed-tools target/bench/tools.classpath
	$(PY) tests/bench/scaling.py $(SCALING_ARGS)

# p50/p99 from a record's send to the sink's write, real time and micro-batch, at steady rates
# (docs/internals/real-time-measurements.md): make bench-latency LATENCY_ARGS="--rates 1000,5000"
bench-latency: $(VENV)/installed-wheel $(VENV)/installed-tools target/bench/tools.classpath
	$(PY) tests/bench/latency.py $(LATENCY_ARGS)

# Where a real-time query's slowest records lose their milliseconds (the boundary between batches, and the read
# tasks' own clocks), kafka-share and the built-in source, one run each: make bench-latency-profile LATENCY_PROFILE_ARGS="--rate 5000"
bench-latency-profile: $(VENV)/installed-wheel $(VENV)/installed-tools
	$(PY) tests/bench/latency_profile.py $(LATENCY_PROFILE_ARGS)

# Where a read task's time goes (polling, pinning, acknowledging, Spark), per batch; --jfr FILE adds a
# Flight Recorder profile. One run, a diagnosis: make bench-profile PROFILE_READ_ARGS="--strategy none --jfr /tmp/p.jfr"
bench-profile: $(VENV)/installed-wheel $(VENV)/installed-tools
	$(PY) tests/bench/profile_read.py $(PROFILE_READ_ARGS)

# Checkpoint bytes, consumers created and heap per batch in steady state: make bench-cost COST_ARGS="--batches 20"
bench-cost: $(VENV)/installed-wheel $(VENV)/installed-tools target/bench/tools.classpath
	$(PY) tests/bench/cost.py $(COST_ARGS)

# The jar on the oldest Spark it supports (pyspark.oldest), in a virtualenv of its own: the provider on
# local and local-cluster, the jar reading the oldest broker line (the Delta and S3 tests read the newest), the
# Delta sink test, and checkpoints on S3 through that Spark's older S3A, with a driver crash (and the race of two
# attempts on GCS)
# (every strategy on every broker runs on that Spark line in the stream suites of tests/integration).
# Then the check of Spark's internals on the line between (pyspark.between), which no test JVM runs.
test-compat: $(VENV_OLDEST)/installed-wheel $(VENV_BETWEEN)/installed-wheel $(SPARK_CLASSES_OLDEST) $(DELTA_JARS) $(S3_JARS) $(GCS)
	KAFKASHARE_RESULTS=target/test-results-spark-oldest KAFKASHARE_DELTA_JARS=$$(cat $(DELTA_JARS)) \
		$(VENV_OLDEST)/bin/python -m pytest -n 2 --dist loadgroup --durations=10 --junitxml=target/test-results-spark-oldest/pytest.xml \
		tests/python/test_spark_provider.py tests/python/test_package.py tests/python/test_delivery.py \
		tests/python/test_delta_sink.py tests/python/test_object_store.py tests/python/test_spark_internals.py \
		-m "not long" -k "not loses_nothing or s3_loses_nothing and two-phase-commit"; oldest=$$?; \
	KAFKASHARE_RESULTS=target/test-results-spark-between $(VENV_BETWEEN)/bin/python -m pytest --junitxml=target/test-results-spark-between/pytest.xml \
		tests/python/test_spark_internals.py; between=$$?; \
	[ $$oldest -eq 0 ] && [ $$between -eq 0 ]

# The JVM writes the archive when the application ends (tests/python/spark_apps/class_archive.py says what it loads).
# A speed-up, never a condition: where it cannot be written, the tests run without it (the log says why).
# spark-submit's launcher JVM writes one too, before the driver starts: the driver's, written last, is kept
# if it is the size of Spark's classes.
target/spark-cds/%.jsa: %/installed-runtime tests/python/spark_apps/class_archive.py
	@rm -rf target/spark-cds/$*.scratch $@.part && mkdir -p target/spark-cds/$*.scratch
	@if JDK_JAVA_OPTIONS="-XX:TieredStopAtLevel=1 -XX:ArchiveClassesAtExit=$(CURDIR)/$@.part -Xlog:disable -Xlog:all=warning:stderr" \
		timeout 600 $*/bin/python tests/python/spark_apps/class_archive.py target/spark-cds/$*.scratch \
		> target/spark-cds/$*.log 2>&1 && [ "$$(stat -c %s $@.part 2>/dev/null || echo 0)" -gt 50000000 ]; then \
		mv $@.part $@; \
	else \
		echo "No class archive for $*: its Spark JVMs start without one (target/spark-cds/$*.log):"; \
		tail -5 target/spark-cds/$*.log; rm -f $@.part; \
	fi; rm -rf target/spark-cds/$*.scratch

# Delta's jars for tests/python/test_delta_sink.py, which only the oldest Spark runs (see versions.properties).
$(DELTA_JARS): versions.properties
	rm -rf target/delta && mkdir -p target/delta
	for a in delta-spark_2.13 delta-storage; do \
		mvn -q dependency:copy -Dartifact=io.delta:$$a:$(delta) -DoutputDirectory=target/delta || exit 1; done
	jars=$$(ls $(CURDIR)/target/delta/*.jar) && [ -n "$$jars" ] && echo $$jars | tr ' ' , > $@

$(VENV_OLDEST)/installed-runtime: versions.properties
	python3 -m venv $(VENV_OLDEST)
	$(VENV_OLDEST)/bin/python -m pip install --quiet --no-compile pyspark==$(pyspark.oldest) pytest==$(pytest) pytest-xdist==$(pytest-xdist) \
		'moto[server]==$(moto)'
	@touch $@

$(VENV_OLDEST)/installed-wheel: $(WHEEL) $(HARNESS) $(VENV_OLDEST)/installed-runtime
	$(VENV_OLDEST)/bin/python -m pip install --quiet --no-compile --force-reinstall --no-deps $(WHEEL)
	@touch $@

$(VENV_BETWEEN)/installed-runtime: versions.properties
	python3 -m venv $(VENV_BETWEEN)
	$(VENV_BETWEEN)/bin/python -m pip install --quiet --no-compile pyspark==$(pyspark.between) pytest==$(pytest)
	@touch $@

$(VENV_BETWEEN)/installed-wheel: $(WHEEL) $(VENV_BETWEEN)/installed-runtime
	$(VENV_BETWEEN)/bin/python -m pip install --quiet --no-compile --force-reinstall --no-deps $(WHEEL)
	@touch $@

# What a healthy stream's metrics look like, from a real run: docs/images/healthy-stream.png (docs/reference/metrics.md).
metrics-picture: $(VENV)/installed-wheel $(VENV)/installed-tools
	$(PY) tests/bench/healthy_stream.py $(PICTURE_ARGS)

# The backlog metric building up and draining (docs/reference/metrics.md, docs/guide/scaling.md): make backlog-picture BACKLOG_ARGS="--rate 3000"
backlog-picture: $(VENV)/installed-wheel $(VENV)/installed-tools
	$(PY) tests/bench/backlog_stream.py $(BACKLOG_ARGS)

# The failure suite: F1 to F11 x every strategy, and a 3-node cluster losing a node (docs/internals/reliability.md).
# Parameters: make chaos CHAOS_ARGS="--seed 42 --records 4000 --failures F3,F6 --strategies checkpoint-dedup"
chaos: $(VENV)/installed-wheel $(VENV)/installed-tools target/bench/tools.classpath
	cd tests/python && ../../$(PY) chaos.py --cluster $(CHAOS_ARGS)
	$(PY) -m pytest -n 2 --dist loadgroup -m long tests/python

# Many driver crashes of one two-phase-commit (and one checkpoint-dedup) query into Delta: 20,000 records,
# 4 partitions, parallelism 4, 5 kills at random moments and 3 after the sink committed a batch, then a
# clean run (docs/internals/reliability.md). On the oldest Spark, the one Delta supports.
# Parameters: make crash-series CRASH_ARGS="--seed 42 --strategies two-phase-commit"
crash-series: $(VENV_OLDEST)/installed-wheel $(DELTA_JARS)
	cd tests/python && KAFKASHARE_RESULTS=target/crash-series KAFKASHARE_DELTA_JARS=$$(cat ../../$(DELTA_JARS)) \
		../../$(VENV_OLDEST)/bin/python crash_series.py $(CRASH_ARGS)

# The long run: a steady produce rate for 12 minutes, a failure every minute, live heap of driver and
# executors each minute (docs/internals/reliability.md). Parameters: make longrun LONGRUN_ARGS="--minutes 20 --rate 500"
longrun: $(VENV)/installed-wheel $(VENV)/installed-tools target/bench/tools.classpath
	cd tests/python && ../../$(PY) longrun.py $(LONGRUN_ARGS)

# The GCS connector's shaded jar from Maven Central; fake-gcs-server built from the Go module proxy (about 1 min).
$(GCS): versions.properties
	rm -rf target/gcs && mkdir -p target/gcs
	mvn -q dependency:copy -Dartifact=com.google.cloud.bigdataoss:gcs-connector:$(gcs-connector):jar:shaded -DoutputDirectory=target/gcs
	GOBIN=$(CURDIR)/target/gcs GOFLAGS=-mod=mod go install github.com/fsouza/fake-gcs-server@v$(fake-gcs-server)
	@touch $@

$(S3_JARS): $(HARNESS_SOURCES)
	$(SBT) harness/fetchS3Jars

# Kafka's command-line tools (kafka-tools): the bench's ShareConsumerPerformance, F9's console share consumer.
target/bench/tools.classpath: $(HARNESS_SOURCES)
	$(SBT) harness/fetchBenchTools

# One cache for the five runs: each reads pyspark's stubs, and a fresh clone's first run then reads them once.
MYPY_CACHE = --cache-dir $(CURDIR)/target/mypy-cache
# Types of the package, the tests, the benchmarks and the demo (tests/mypy.ini: as strict as the package).
typecheck: $(VENV)/installed-wheel $(VENV)/installed-tools
	$(PY) -m mypy $(MYPY_CACHE) --strict python/src/spark_kafka_share
	$(PY) -m mypy $(MYPY_CACHE) --strict build/release.py build/check_release.py
	cd tests/python && ../../$(PY) -m mypy $(MYPY_CACHE) --config-file ../mypy.ini .
	cd tests/bench && MYPYPATH=../python ../../$(PY) -m mypy $(MYPY_CACHE) --config-file ../mypy.ini .
	cd python/examples && MYPYPATH=../../tests/python ../../$(PY) -m mypy $(MYPY_CACHE) --config-file ../../tests/mypy.ini .

# Lint and format: ruff over the Python code (ruff.toml), scalafmt over the Scala code and the build
# (.scalafmt.conf). `make format` rewrites what `make lint` would refuse.
SCALA_FORMATTED := jvm/src jvm/realtime/src tests/harness/src tests/integration/src tests/realtime-integration/src build.sbt project/plugins.sbt
SCALAFMT_CP     := target/scalafmt.classpath
SCALAFMT        := java -cp "$$(cat $(SCALAFMT_CP))" org.scalafmt.cli.Cli --config .scalafmt.conf

lint: $(VENV)/installed-tools $(SCALAFMT_CP)
	$(PY) -m ruff check python tests build
	$(PY) -m ruff format --check python tests build
	$(SCALAFMT) --test --quiet $(SCALA_FORMATTED)

format: $(VENV)/installed-tools $(SCALAFMT_CP)
	$(PY) -m ruff check --fix python tests build
	$(PY) -m ruff format python tests build
	$(SCALAFMT) --quiet $(SCALA_FORMATTED)

$(SCALAFMT_CP): versions.properties
	$(SBT) fetchScalafmt

build: $(JAR) $(HARNESS)

wheel: $(WHEEL)

# The connector as a Maven repository in target/maven-repo: spark-submit --packages io.github.kafkashare:spark-kafka-share_2.13:<version> --repositories file://$$PWD/target/maven-repo
publish: $(MAVEN_REPO)

$(JAR): $(JVM_SOURCES)
	$(SBT) connector/assembly
	@touch $@

$(MAVEN_REPO): $(JVM_SOURCES)
	$(SBT) connector/publish
	@touch $@

# What Maven Central and PyPI take, checksummed and signed, in target/release/, then checked offline
# (build/check_release.py: Central's requirements, gpg signatures, twine check). The signing key comes from the
# environment: RELEASE_GPG_KEY (an armored secret key, or its file), RELEASE_GPG_KEY_ID, RELEASE_GPG_PASSPHRASE,
# or the keyring of GNUPGHOME (docs/internals/releasing.md).
release: $(RELEASE_MAVEN) $(RELEASE_PYPI) $(VENV)/installed-tools
	$(PY) build/release.py --stage $(RELEASE_STAGE) --out target/release
	$(PY) build/check_release.py target/release

$(RELEASE_MAVEN): $(JVM_SOURCES) LICENSE NOTICE
	$(SBT) connector/releaseStage
	@touch $@

# The sdist is built from the same tree as the wheel, the jar inside (it holds no Scala sources to build one from).
$(RELEASE_PYPI): $(WHEEL)
	rm -rf $(RELEASE_STAGE)/pypi && mkdir -p $(RELEASE_STAGE)/pypi
	cp $(WHEEL) $(RELEASE_STAGE)/pypi/
	$(PY) -m build --sdist --no-isolation --outdir $(RELEASE_STAGE)/pypi python
	@test -f $(SDIST) || { echo "the sdist $(SDIST) was not built"; exit 1; }
	@touch $@

$(HARNESS): $(HARNESS_SOURCES)
	$(SBT) harness/exportHarnessClasspath

# The wheel carries the jar and the project version, both generated here (ignored by git).
$(WHEEL): $(JAR) $(PY_SOURCES) $(VENV)/installed-runtime
	rm -rf $(PKG)/jars dist python/build
	mkdir -p $(PKG)/jars
	cp $(JAR) $(PKG)/jars/
	cp LICENSE NOTICE python/
	printf '"""Generated by the Makefile from versions.properties."""\n\n__version__ = "%s"\n' '$(project.version)' > $(PKG)/_version.py
	$(PY) -m build --wheel --no-isolation --outdir dist python

$(VENV)/installed-wheel: $(WHEEL) $(HARNESS)
	$(PY) -m pip install --quiet --no-compile --force-reinstall --no-deps $(WHEEL)
	@touch $@

# What the demo needs (pyspark, and the tools that build the wheel); the test, lint and benchmark tools
# come on top, only for the targets that use them. --no-compile: Python compiles what it imports when it
# first imports it; compiling every module of pyspark, pandas and pyarrow up front took a minute of CPU.
$(VENV)/installed-runtime: versions.properties
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --no-compile pyspark==$(pyspark) build==$(build) setuptools==$(setuptools)
	@touch $@

$(VENV)/installed-tools: $(VENV)/installed-runtime
	$(PY) -m pip install --quiet --no-compile pytest==$(pytest) pytest-xdist==$(pytest-xdist) mypy==$(mypy) ruff==$(ruff) pyyaml==$(pyyaml) \
		twine==$(twine) pandas==$(pandas) pyarrow==$(pyarrow) grpcio==$(grpcio) \
		grpcio-status==$(grpcio-status) googleapis-common-protos==$(googleapis-common-protos) zstandard==$(zstandard) \
		matplotlib==$(matplotlib) 'moto[server]==$(moto)' trove-classifiers==$(trove-classifiers)
	@touch $@

clean:
	rm -rf target */target tests/*/target project/target project/project dist python/build $(PKG)/jars $(PKG)/_version.py $(VENV) $(VENV_OLDEST) $(VENV_BETWEEN)
