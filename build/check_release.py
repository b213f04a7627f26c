#!/usr/bin/env python3
"""Checks a release bundle offline against what Maven Central and PyPI take, before anything is uploaded.

    build/check_release.py target/release [--key target/release/signing-key.asc] [--no-twine]

Maven Central's published requirements (https://central.sonatype.org/publish/requirements/), per coordinate
(every POM under maven/):
  - the POM's groupId, artifactId and version are those of its path, and the version is no SNAPSHOT;
  - the POM has modelVersion, groupId, artifactId, version, name, description, url, licenses (each with a name
    and url), developers (each with a name), and scm with url and connection, none of them empty; every
    dependency it names has a version that is no SNAPSHOT;
  - a packaging other than pom has <artifactId>-<version>.<packaging>, -sources.jar and -javadoc.jar beside
    it, each a readable zip; the sources jar holds sources and the javadoc jar holds an index.html;
  - every file has .md5 and .sha1 files (.sha256 and .sha512 if there) that match it;
  - every file has an .asc signature that gpg verifies with the given public key alone (a throwaway keyring);
  - central-bundle.zip, if there, holds exactly the files of maven/, byte for byte.
PyPI, for each wheel and sdist under pypi/: `twine check --strict`, the version is the POM's, the jar a wheel
carries is the Maven jar (entry for entry), every classifier is one PyPI knows (trove-classifiers), and the
metadata has Requires-Python, the project URLs (Homepage, Documentation, Source, Issues, Changelog), a Markdown
long description, and no relative link in it (PyPI shows the description away from the repository).

Exits 1 and lists every failure; needs gpg, and twine (importable by this Python) unless --no-twine.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from email.parser import Parser
from pathlib import Path
from xml.etree import ElementTree

CHECKSUMS = ("md5", "sha1", "sha256", "sha512")
REQUIRED_CHECKSUMS = ("md5", "sha1")
DERIVED = tuple(f".{c}" for c in CHECKSUMS) + (".asc",)
POM_NS = "{http://maven.apache.org/POM/4.0.0}"
# What Central asks of every POM (paths below <project>); each must be there and not empty.
POM_REQUIRED = [
    "modelVersion",
    "groupId",
    "artifactId",
    "version",
    "name",
    "description",
    "url",
    "licenses/license/name",
    "licenses/license/url",
    "developers/developer/name",
    "scm/url",
    "scm/connection",
]
PROJECT_URLS = ("Homepage", "Documentation", "Source", "Issues", "Changelog")
# A Markdown link or image target, and an HTML href/src: relative ones do not resolve on PyPI.
LINK = re.compile(r"\]\(\s*<?([^)\s>]+)|(?:href|src)=\"([^\"]+)\"")


def _find(root: ElementTree.Element, path: str) -> list[ElementTree.Element]:
    return root.findall("/".join(POM_NS + part for part in path.split("/")))


def _text(root: ElementTree.Element, path: str) -> str:
    found = _find(root, path)
    return (found[0].text or "").strip() if found else ""


def check_pom(pom: Path, failures: list[str]) -> tuple[str, str]:
    """Checks one POM against its path; returns its artifactId-version base name and its packaging."""
    where = pom.name
    try:
        root = ElementTree.parse(pom).getroot()
    except ElementTree.ParseError as e:
        failures.append(f"{where}: not XML ({e})")
        return pom.stem, "jar"
    version_dir, artifact_dir, group_dir = pom.parent, pom.parent.parent, pom.parent.parent.parent
    for path in POM_REQUIRED:
        elements = _find(root, path)
        if not elements:
            failures.append(f"{where}: no <{path.replace('/', '><')}> (Central requires it)")
        for element in elements:
            if not (element.text or "").strip():
                failures.append(f"{where}: <{path.replace('/', '><')}> is empty (Central requires a value)")
    group, artifact, version = _text(root, "groupId"), _text(root, "artifactId"), _text(root, "version")
    maven_root = next((p for p in pom.parents if p.name == "maven"), None)
    if maven_root is not None and group and group_dir.relative_to(maven_root).as_posix().replace("/", ".") != group:
        failures.append(f"{where}: groupId {group} is not that of its folder {group_dir.relative_to(maven_root)}")
    if artifact and artifact != artifact_dir.name:
        failures.append(f"{where}: artifactId {artifact} is not that of its folder {artifact_dir.name}")
    if version and version != version_dir.name:
        failures.append(f"{where}: version {version} is not that of its folder {version_dir.name}")
    if version.endswith("-SNAPSHOT"):
        failures.append(f"{where}: version {version}: Central takes no SNAPSHOT")
    if pom.name != f"{artifact}-{version}.pom":
        failures.append(f"{where}: a POM of {artifact} {version} must be named {artifact}-{version}.pom")
    for dependency in _find(root, "dependencies/dependency"):
        name = f"{dependency.findtext(POM_NS + 'groupId')}:{dependency.findtext(POM_NS + 'artifactId')}"
        dep_version = (dependency.findtext(POM_NS + "version") or "").strip()
        if not dep_version or dep_version.endswith("-SNAPSHOT"):
            failures.append(f"{where}: dependency {name} needs a released version (has {dep_version or 'none'})")
    return f"{artifact}-{version}", _text(root, "packaging") or "jar"


def check_jars(folder: Path, base: str, packaging: str, failures: list[str]) -> None:
    if packaging == "pom":
        return
    wanted = {f"{base}.{packaging}": "", f"{base}-sources.jar": "sources", f"{base}-javadoc.jar": "javadoc"}
    for name, kind in wanted.items():
        path = folder / name
        if not path.is_file():
            failures.append(f"{folder.name}: {name} is missing (Central requires the {kind or 'main'} artifact)")
            continue
        try:
            with zipfile.ZipFile(path) as z:
                names = z.namelist()
                bad = z.testzip()
        except zipfile.BadZipFile:
            failures.append(f"{name}: not a readable jar")
            continue
        if bad is not None:
            failures.append(f"{name}: entry {bad} is corrupt")
        if kind == "sources" and not any(n.endswith((".scala", ".java")) for n in names):
            failures.append(f"{name}: holds no .scala or .java source")
        if kind == "javadoc" and "index.html" not in names:
            failures.append(f"{name}: holds no index.html")
        if kind == "" and not any(n.endswith(".class") for n in names):
            failures.append(f"{name}: holds no class")


def check_checksums(file: Path, failures: list[str]) -> None:
    for algorithm in CHECKSUMS:
        sidecar = Path(f"{file}.{algorithm}")
        if not sidecar.is_file():
            if algorithm in REQUIRED_CHECKSUMS:
                failures.append(f"{file.name}: no .{algorithm} (Central requires .md5 and .sha1)")
            continue
        # The file may hold "<hex>" or "<hex>  <name>", as md5sum writes it.
        stated = sidecar.read_text().split()[0].lower() if sidecar.read_text().split() else ""
        if stated != hashlib.new(algorithm, file.read_bytes()).hexdigest():
            failures.append(f"{file.name}: its .{algorithm} does not match the file")


def check_signatures(files: list[Path], key: Path, failures: list[str]) -> None:
    if shutil.which("gpg") is None:
        failures.append("gpg is not on the PATH: signatures cannot be verified")
        return
    if not key.is_file():
        failures.append(f"{key}: no public key to verify the signatures with")
        return
    home = Path(tempfile.mkdtemp(prefix="gpg-check-", dir="/tmp"))
    try:
        home.chmod(0o700)
        base = ["gpg", "--homedir", str(home), "--batch", "--no-tty"]
        imported = subprocess.run([*base, "--import", str(key)], capture_output=True, text=True)
        if imported.returncode != 0:
            failures.append(f"{key.name}: gpg cannot import it ({imported.stderr.strip()})")
            return
        for file in files:
            signature = Path(f"{file}.asc")
            if not signature.is_file():
                failures.append(f"{file.name}: no .asc signature (Central requires one per file)")
                continue
            if not signature.read_text(errors="replace").startswith("-----BEGIN PGP SIGNATURE-----"):
                failures.append(f"{signature.name}: not an ASCII-armored detached signature")
                continue
            verified = subprocess.run(
                [*base, "--status-fd", "1", "--verify", str(signature), str(file)], capture_output=True, text=True
            )
            if verified.returncode != 0 or "[GNUPG:] VALIDSIG" not in verified.stdout:
                reason = verified.stderr.strip().splitlines()[-1] if verified.stderr.strip() else "no valid signature"
                failures.append(f"{signature.name}: does not verify with {key.name} ({reason})")
    finally:
        subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "gpg-agent"], capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


def check_bundle(maven: Path, bundle: Path, failures: list[str]) -> None:
    expected = {p.relative_to(maven).as_posix(): p for p in maven.rglob("*") if p.is_file()}
    with zipfile.ZipFile(bundle) as z:
        held = {n for n in z.namelist() if not n.endswith("/")}
        for name in sorted(held - set(expected)):
            failures.append(f"{bundle.name}: {name} is not in maven/")
        for name in sorted(set(expected) - held):
            failures.append(f"{bundle.name}: lacks {name}")
        for name in sorted(held & set(expected)):
            if z.read(name) != expected[name].read_bytes():
                failures.append(f"{bundle.name}: {name} differs from maven/{name}")


def metadata_of(dist: Path) -> str:
    if dist.suffix == ".whl":
        with zipfile.ZipFile(dist) as z:
            name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
            return z.read(name).decode()
    with tarfile.open(dist) as t:
        member = next(m for m in t.getmembers() if m.name.count("/") == 1 and m.name.endswith("/PKG-INFO"))
        extracted = t.extractfile(member)
        return extracted.read().decode() if extracted else ""


def check_python(dist: Path, version: str | None, failures: list[str]) -> None:
    try:
        message = Parser().parsestr(metadata_of(dist))
    except (StopIteration, KeyError, zipfile.BadZipFile, tarfile.TarError) as e:
        failures.append(f"{dist.name}: no metadata ({e!r})")
        return
    if version is not None and message["Version"] != version:
        failures.append(f"{dist.name}: version {message['Version']} is not the POM's {version}")
    if not message["Requires-Python"]:
        failures.append(f"{dist.name}: no Requires-Python")
    urls = {u.split(",", 1)[0].strip().lower(): u.split(",", 1)[1].strip() for u in message.get_all("Project-URL") or []}
    for label in PROJECT_URLS:
        if not urls.get(label.lower(), "").startswith("https://"):
            failures.append(f"{dist.name}: no https Project-URL '{label}'")
    try:
        from trove_classifiers import classifiers as known
    except ImportError:
        failures.append("trove-classifiers is not importable: the classifiers cannot be checked (pip install trove-classifiers)")
    else:
        for classifier in message.get_all("Classifier") or []:
            if classifier not in known:
                failures.append(f"{dist.name}: PyPI does not know the classifier {classifier!r} (it refuses the upload)")
    if message["Description-Content-Type"] != "text/markdown":
        failures.append(f"{dist.name}: the long description is not Markdown ({message['Description-Content-Type']})")
    description = message.get_payload()
    description = description if isinstance(description, str) else ""
    if len(description.strip()) < 200:
        failures.append(f"{dist.name}: the long description is missing or a stub")
    for groups in LINK.findall(description):
        target = next(g for g in groups if g)
        if not re.match(r"^(https?:|mailto:)", target):
            failures.append(f"{dist.name}: the long description links to {target!r}, which PyPI cannot resolve")


def _entries(jar: zipfile.ZipFile) -> dict[str, int]:
    return {i.filename: i.CRC for i in jar.infolist() if not i.is_dir()}


def check_bundled_jar(wheel: Path, maven: Path, failures: list[str]) -> None:
    """The jar inside the wheel is the Maven artifact of the same name, entry for entry (timestamps aside)."""
    with zipfile.ZipFile(wheel) as z:
        for name in (n for n in z.namelist() if n.startswith("spark_kafka_share/jars/") and n.endswith(".jar")):
            jar_name = name.rsplit("/", 1)[1]
            artifact = next(iter(sorted(maven.rglob(jar_name))), None)
            if artifact is None:
                failures.append(f"{wheel.name}: carries {jar_name}, which is no Maven artifact of this release")
                continue
            try:
                with zipfile.ZipFile(io.BytesIO(z.read(name))) as bundled, zipfile.ZipFile(artifact) as published:
                    if _entries(bundled) != _entries(published):
                        failures.append(f"{wheel.name}: its {jar_name} differs from the Maven artifact (not the same build)")
            except zipfile.BadZipFile:
                failures.append(f"{wheel.name}: its {jar_name} or the Maven artifact is not a readable jar")


def twine_check(dists: list[Path], failures: list[str]) -> None:
    done = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *map(str, dists)], capture_output=True, text=True)
    if done.returncode != 0:
        failures.append(f"twine check --strict failed: {(done.stdout + done.stderr).strip()}")


def check(release: Path, key: Path, run_twine: bool = True) -> list[str]:
    """Every failure found in ``release``; empty when it is ready to upload."""
    failures: list[str] = []
    maven = release / "maven"
    poms = sorted(maven.rglob("*.pom")) if maven.is_dir() else []
    if not poms:
        failures.append(f"{maven}: no POM, so no coordinate to check")
    version: str | None = None
    for pom in poms:
        base, packaging = check_pom(pom, failures)
        check_jars(pom.parent, base, packaging, failures)
        version = pom.parent.name
    files = sorted(p for p in maven.rglob("*") if p.is_file() and not p.name.endswith(DERIVED)) if maven.is_dir() else []
    for file in files:
        check_checksums(file, failures)
    check_signatures(files, key, failures)
    for derived in sorted(p for p in maven.rglob("*") if p.is_file() and p.name.endswith(DERIVED)) if maven.is_dir() else []:
        original = derived.with_name(derived.name.rsplit(".", 1)[0])
        if not original.is_file() and not original.name.endswith(DERIVED):
            failures.append(f"{derived.name}: belongs to no file")
    bundle = release / "central-bundle.zip"
    if bundle.is_file() and maven.is_dir():
        check_bundle(maven, bundle, failures)
    dists = sorted(p for p in (release / "pypi").glob("*") if p.suffix == ".whl" or p.name.endswith(".tar.gz"))
    if not any(d.suffix == ".whl" for d in dists):
        failures.append(f"{release / 'pypi'}: no wheel")
    for dist in dists:
        check_python(dist, version, failures)
        if dist.suffix == ".whl" and maven.is_dir():
            check_bundled_jar(dist, maven, failures)
    if run_twine and dists:
        twine_check(dists, failures)
    return failures


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("release", type=Path, nargs="?", default=Path("target/release"))
    parser.add_argument("--key", type=Path, help="the public key (default: <release>/signing-key.asc)")
    parser.add_argument("--no-twine", action="store_true", help="skip twine check (it needs twine installed)")
    args = parser.parse_args(argv)
    failures = check(args.release, args.key or args.release / "signing-key.asc", run_twine=not args.no_twine)
    for failure in failures:
        print(f"FAIL {failure}")
    if failures:
        print(f"check_release.py: {len(failures)} failures in {args.release}")
        return 1
    print(f"check_release.py: {args.release} meets Maven Central's requirements and passes twine check")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
