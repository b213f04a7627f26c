"""`make release` without a real key: build/release.py signs the release stage with a throwaway key, and
build/check_release.py, the offline check of what Maven Central and PyPI take, passes it, and fails each way a
bundle can be wrong (docs/internals/releasing.md).

The stage (target/release-stage: the jar, sources and Scaladoc jars, the POM, the wheel and the sdist) is built by
`make test-python`'s prerequisites; sbt does not run here.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from harness import ROOT, pins

STAGE = ROOT / "target" / "release-stage"
VERSION = pins()["project.version"]
COORDINATE = Path("io/github/kafkashare/spark-kafka-share_2.13") / VERSION
BASE = f"spark-kafka-share_2.13-{VERSION}"
PASSPHRASE = "throwaway passphrase"


def _module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "build" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check_release = _module("check_release")


def _gpg_home(prefix: str) -> Path:
    # gpg-agent's socket goes in the home: keep its path short (pytest's tmp_path can be too long for a socket).
    home = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    home.chmod(0o700)
    return home


def _new_key(home: Path, name: str, passphrase: str) -> str:
    subprocess.run(
        ["gpg", "--homedir", str(home), "--batch", "--pinentry-mode", "loopback", "--passphrase", passphrase,
         "--quick-gen-key", f"{name} <{name}@example.invalid>", "ed25519", "sign", "1d"],
        check=True, capture_output=True,
    )  # fmt: skip
    listing = subprocess.run(
        ["gpg", "--homedir", str(home), "--batch", "--with-colons", "--list-secret-keys"],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    return next(line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:"))


@pytest.fixture(scope="module")
def throwaway_key() -> Iterator[tuple[Path, str, str]]:
    """A keyring with one passphrase-protected signing key: (GNUPGHOME, fingerprint, armored secret key)."""
    assert shutil.which("gpg"), "gpg is not on the PATH (Debian: apt-get install gnupg); make release needs it too"
    home = _gpg_home("gpg-test-")
    try:
        fingerprint = _new_key(home, "throwaway", PASSPHRASE)
        secret = subprocess.run(
            ["gpg", "--homedir", str(home), "--batch", "--pinentry-mode", "loopback", "--passphrase", PASSPHRASE,
             "--armor", "--export-secret-keys", fingerprint],
            check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
        yield home, fingerprint, secret
    finally:
        subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "gpg-agent"], capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


def _release(out: Path, **env: str) -> subprocess.CompletedProcess[str]:
    assert (STAGE / "maven" / COORDINATE / f"{BASE}.pom").is_file(), f"{STAGE} is not built: make test-python builds it"
    assert list((STAGE / "pypi").glob("*.whl")), f"{STAGE}/pypi holds no wheel: make test-python builds it"
    environment = {k: v for k, v in os.environ.items() if not k.startswith("RELEASE_GPG_") and k != "GNUPGHOME"}
    return subprocess.run(
        [sys.executable, str(ROOT / "build" / "release.py"), "--stage", str(STAGE), "--out", str(out)],
        capture_output=True, text=True, env={**environment, **env},
    )  # fmt: skip


@pytest.fixture(scope="module")
def bundle(throwaway_key: tuple[Path, str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The release signed with the throwaway key, given as make release takes it: the armored key in RELEASE_GPG_KEY."""
    _, _, secret = throwaway_key
    out = tmp_path_factory.mktemp("release") / "release"
    done = _release(out, RELEASE_GPG_KEY=secret, RELEASE_GPG_PASSPHRASE=PASSPHRASE)
    assert done.returncode == 0, done.stderr
    return out


def _copy(bundle: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "release"
    shutil.copytree(bundle, copy)
    return copy


def test_the_bundle_has_every_file_central_and_pypi_take(bundle: Path) -> None:
    folder = bundle / "maven" / COORDINATE
    artifacts = [f"{BASE}.jar", f"{BASE}-sources.jar", f"{BASE}-javadoc.jar", f"{BASE}.pom"]
    expected = {name + suffix for name in artifacts for suffix in ("", ".md5", ".sha1", ".sha256", ".sha512", ".asc")}
    assert {p.name for p in folder.iterdir()} == expected
    assert {p.name for p in (bundle / "pypi").iterdir()} == {
        f"spark_kafka_share-{VERSION}-py3-none-any.whl",
        f"spark_kafka_share-{VERSION}.tar.gz",
    }
    assert (bundle / "central-bundle.zip").is_file() and (bundle / "signing-key.asc").is_file()


def test_the_offline_check_passes_the_bundle(bundle: Path) -> None:
    """The command line `make release` ends with: Central's requirements, gpg verification, twine check --strict."""
    done = subprocess.run([sys.executable, str(ROOT / "build" / "check_release.py"), str(bundle)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "meets Maven Central's requirements and passes twine check" in done.stdout


def test_a_keyring_from_gnupghome_signs_too(throwaway_key: tuple[Path, str, str], tmp_path: Path) -> None:
    home, fingerprint, _ = throwaway_key
    out = tmp_path / "release"
    done = _release(out, GNUPGHOME=str(home), RELEASE_GPG_KEY_ID=fingerprint, RELEASE_GPG_PASSPHRASE=PASSPHRASE)
    assert done.returncode == 0, done.stderr
    assert fingerprint in done.stdout
    assert check_release.check(out, out / "signing-key.asc", run_twine=False) == []


def test_release_refuses_without_a_key_or_with_a_wrong_passphrase(throwaway_key: tuple[Path, str, str], tmp_path: Path) -> None:
    empty = _gpg_home("gpg-empty-")
    try:
        done = _release(tmp_path / "none", GNUPGHOME=str(empty))
        assert done.returncode == 1 and "no secret key" in done.stderr and "RELEASE_GPG_KEY" in done.stderr
    finally:
        subprocess.run(["gpgconf", "--homedir", str(empty), "--kill", "gpg-agent"], capture_output=True)
        shutil.rmtree(empty, ignore_errors=True)
    _, _, secret = throwaway_key
    wrong = _release(tmp_path / "wrong", RELEASE_GPG_KEY=secret, RELEASE_GPG_PASSPHRASE="not it")
    assert wrong.returncode == 1 and "gpg" in wrong.stderr and "failed" in wrong.stderr


def test_a_changed_byte_fails_its_checksums_and_signature(bundle: Path, tmp_path: Path) -> None:
    release = _copy(bundle, tmp_path)
    jar = release / "maven" / COORDINATE / f"{BASE}.jar"
    data = bytearray(jar.read_bytes())
    data[-1] ^= 0xFF
    jar.write_bytes(bytes(data))
    failures = "\n".join(check_release.check(release, release / "signing-key.asc", run_twine=False))
    for algorithm in ("md5", "sha1", "sha256", "sha512"):
        assert f"{BASE}.jar: its .{algorithm} does not match the file" in failures
    assert f"{BASE}.jar.asc: does not verify" in failures
    assert "central-bundle.zip" in failures  # the zip no longer matches maven/


def test_missing_javadoc_checksum_and_signature_each_fail(bundle: Path, tmp_path: Path) -> None:
    release = _copy(bundle, tmp_path)
    folder = release / "maven" / COORDINATE
    for name in (f"{BASE}-javadoc.jar", f"{BASE}-javadoc.jar.md5", f"{BASE}-javadoc.jar.sha1", f"{BASE}-javadoc.jar.asc"):
        (folder / name).unlink()
    (folder / f"{BASE}.pom.sha1").unlink()
    (folder / f"{BASE}-sources.jar.asc").unlink()
    failures = "\n".join(check_release.check(release, release / "signing-key.asc", run_twine=False))
    assert f"{BASE}-javadoc.jar is missing (Central requires the javadoc artifact)" in failures
    assert f"{BASE}.pom: no .sha1" in failures
    assert f"{BASE}-sources.jar: no .asc signature" in failures
    assert "belongs to no file" in failures  # the javadoc jar's .sha256 and .sha512 are left over


def test_a_pom_without_what_central_requires_fails(bundle: Path, tmp_path: Path) -> None:
    release = _copy(bundle, tmp_path)
    pom = release / "maven" / COORDINATE / f"{BASE}.pom"
    text = pom.read_text()
    start, end = text.index("<scm>"), text.index("</scm>") + len("</scm>")
    text = text[:start] + text[end:]
    text = re.sub(r"<description>.*?</description>", "<description> </description>", text, flags=re.S)
    pom.write_text(text.replace(f"<version>{VERSION}</version>", f"<version>{VERSION}-SNAPSHOT</version>"))
    failures = "\n".join(check_release.check(release, release / "signing-key.asc", run_twine=False))
    assert "no <scm><url>" in failures and "no <scm><connection>" in failures
    assert "<description> is empty" in failures
    assert "Central takes no SNAPSHOT" in failures


def test_a_signature_by_another_key_fails(bundle: Path, tmp_path: Path) -> None:
    release = _copy(bundle, tmp_path)
    other = _gpg_home("gpg-other-")
    try:
        _new_key(other, "other", PASSPHRASE)
        public = subprocess.run(
            ["gpg", "--homedir", str(other), "--batch", "--armor", "--export"], check=True, capture_output=True, text=True
        )
        (tmp_path / "other.asc").write_text(public.stdout)
    finally:
        subprocess.run(["gpgconf", "--homedir", str(other), "--kill", "gpg-agent"], capture_output=True)
        shutil.rmtree(other, ignore_errors=True)
    failures = check_release.check(release, tmp_path / "other.asc", run_twine=False)
    assert len([f for f in failures if "does not verify with other.asc" in f]) == 4, failures


def test_python_metadata_that_pypi_would_show_badly_fails(tmp_path: Path) -> None:
    """A wheel whose long description has a relative link, without project URLs, with an unknown classifier."""
    release = tmp_path / "release"
    (release / "pypi").mkdir(parents=True)
    wheel = release / "pypi" / f"spark_kafka_share-{VERSION}-py3-none-any.whl"
    metadata = (
        f"Metadata-Version: 2.4\nName: spark-kafka-share\nVersion: {VERSION}\n"
        "Classifier: Programming Language :: Scala\nDescription-Content-Type: text/markdown\n\n"
        + "See [the options](docs/options.md) for more. "
        * 10
    )
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(f"spark_kafka_share-{VERSION}.dist-info/METADATA", metadata)
    failures = "\n".join(check_release.check(release, release / "signing-key.asc", run_twine=False))
    assert "no Requires-Python" in failures
    assert "no https Project-URL 'Changelog'" in failures
    assert "links to 'docs/options.md'" in failures
    assert "does not know the classifier 'Programming Language :: Scala'" in failures


def test_a_maven_jar_of_another_build_than_the_wheels_fails(bundle: Path, tmp_path: Path) -> None:
    release = _copy(bundle, tmp_path)
    jar = release / "maven" / COORDINATE / f"{BASE}.jar"
    with zipfile.ZipFile(jar, "a") as z:
        z.writestr("io/github/kafkashare/spark/Extra.class", b"not the wheel's build")
    failures = "\n".join(check_release.check(release, release / "signing-key.asc", run_twine=False))
    assert f"its {BASE}.jar differs from the Maven artifact (not the same build)" in failures
