#!/usr/bin/env python3
"""Turns the release stage (`make release`'s unsigned artifacts) into what Maven Central and PyPI take.

    build/release.py --stage target/release-stage --out target/release

In --out: maven/ (the Maven layout, every file with its .md5, .sha1, .sha256, .sha512 and .asc),
central-bundle.zip (the same tree, the upload the Central Portal takes), pypi/ (the wheel and the sdist, for
`twine upload`), signing-key.asc (the public key the signatures verify with). The key (docs/internals/releasing.md):

    RELEASE_GPG_KEY         an ASCII-armored secret key (the key itself, or the path of a file holding it),
                            imported into a throwaway GNUPGHOME for this run only
    RELEASE_GPG_KEY_ID      which secret key signs (gpg's --local-user); without it, the only one there is
    RELEASE_GPG_PASSPHRASE  the key's passphrase, if it has one (handed to gpg on a pipe, never on its command line)
    GNUPGHOME               without RELEASE_GPG_KEY: the keyring to sign from (gpg's default: ~/.gnupg)

Standard library and the machine's gpg only.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHECKSUMS = ("md5", "sha1", "sha256", "sha512")
DERIVED = tuple(f".{c}" for c in CHECKSUMS) + (".asc",)


class ReleaseError(Exception):
    """What stops a release, said so that the one running it knows what to do."""


def checksum(path: Path, algorithm: str) -> str:
    digest = hashlib.new(algorithm)
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def gpg(home: Path, *args: str, passphrase: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    """gpg in batch mode on keyring ``home``; a passphrase goes through a pipe (--passphrase-fd), not argv."""
    command = ["gpg", "--homedir", str(home), "--batch", "--yes", "--no-tty"]
    pass_fds: tuple[int, ...] = ()
    read_end = -1
    if passphrase is not None:
        read_end, write_end = os.pipe()
        os.write(write_end, passphrase.encode() + b"\n")
        os.close(write_end)
        command += ["--pinentry-mode", "loopback", "--passphrase-fd", str(read_end)]
        pass_fds = (read_end,)
    try:
        done = subprocess.run([*command, *args], capture_output=True, text=True, pass_fds=pass_fds)
    finally:
        if read_end >= 0:
            os.close(read_end)
    if check and done.returncode != 0:
        raise ReleaseError(f"gpg {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    return done


@contextmanager
def keyring(env: Mapping[str, str]) -> Iterator[Path]:
    """The GNUPGHOME to sign from: a throwaway one holding RELEASE_GPG_KEY, or the environment's own."""
    if shutil.which("gpg") is None:
        raise ReleaseError("gpg is not on the PATH: install GnuPG (Debian: apt-get install gnupg)")
    key = env.get("RELEASE_GPG_KEY", "").strip()
    if not key:
        yield Path(env.get("GNUPGHOME") or Path.home() / ".gnupg")
        return
    if "-----BEGIN PGP PRIVATE KEY BLOCK-----" not in key:
        if not Path(key).is_file():
            raise ReleaseError("RELEASE_GPG_KEY is neither an ASCII-armored secret key nor the path of a file holding one")
        key = Path(key).read_text()
    # A short path: gpg-agent's socket lives in the home, and a socket path has at most 107 characters.
    home = Path(tempfile.mkdtemp(prefix="gpg-release-", dir="/tmp"))
    try:
        home.chmod(0o700)
        done = subprocess.run(
            ["gpg", "--homedir", str(home), "--batch", "--no-tty", "--import"], input=key, capture_output=True, text=True
        )
        if done.returncode != 0:
            raise ReleaseError(f"RELEASE_GPG_KEY could not be imported: {done.stderr.strip()}")
        yield home
    finally:
        subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "gpg-agent"], capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


def signing_key(home: Path, wanted: str | None) -> str:
    """The fingerprint of the secret key that signs: RELEASE_GPG_KEY_ID's, or the only one in the keyring."""
    listing = gpg(home, "--with-colons", "--list-secret-keys", *([wanted] if wanted else []), check=False)
    fingerprints: list[str] = []
    primary = False
    for line in listing.stdout.splitlines():
        fields = line.split(":")
        if fields[0] == "sec":
            primary = True
        elif fields[0] == "fpr" and primary:
            fingerprints.append(fields[9])
            primary = False
    if not fingerprints:
        where = f"no secret key matching {wanted!r}" if wanted else "no secret key"
        raise ReleaseError(
            f"{where} in {home}: set RELEASE_GPG_KEY (an armored secret key) or GNUPGHOME, and RELEASE_GPG_KEY_ID "
            "if the keyring holds several (docs/internals/releasing.md)"
        )
    if len(fingerprints) > 1:
        raise ReleaseError(f"{len(fingerprints)} secret keys in {home}: say which signs with RELEASE_GPG_KEY_ID")
    return fingerprints[0]


def write_checksums(path: Path) -> None:
    for algorithm in CHECKSUMS:
        Path(f"{path}.{algorithm}").write_text(checksum(path, algorithm))


def changelog_heading(root: Path, version: str) -> str | None:
    """The heading of ``version``'s section in CHANGELOG.md, if it has one."""
    changelog = root / "CHANGELOG.md"
    found = re.search(rf"^## \[{re.escape(version)}\].*$", changelog.read_text(), flags=re.M) if changelog.is_file() else None
    return found.group(0) if found else None


def release(stage: Path, out: Path, env: Mapping[str, str]) -> list[str]:
    """Builds ``out`` from ``stage``; returns the files written, relative to ``out``."""
    maven_stage, pypi_stage = stage / "maven", stage / "pypi"
    artifacts = sorted(p for p in maven_stage.rglob("*") if p.is_file() and not p.name.endswith(DERIVED))
    if not artifacts:
        raise ReleaseError(f"{maven_stage} holds no artifact: run `make release` (it builds the stage first)")
    poms = [p for p in artifacts if p.suffix == ".pom"]
    for pom in poms:
        version = pom.parent.name
        if version.endswith("-SNAPSHOT"):
            raise ReleaseError(f"{pom.name}: Maven Central takes no SNAPSHOT version")
        heading = changelog_heading(ROOT, version)
        if heading is None or not re.search(r" - \d{4}-\d{2}-\d{2}$", heading):
            # A warning, not a refusal: `make test` signs the stage with a throwaway key before a release is dated.
            undated = f"CHANGELOG.md has no dated '## [{version}] - YYYY-MM-DD'"
            print(f"release.py: {undated} (docs/internals/releasing.md)", file=sys.stderr)
    if out.exists():
        shutil.rmtree(out)
    maven = out / "maven"
    with keyring(env) as home:
        fingerprint = signing_key(home, env.get("RELEASE_GPG_KEY_ID") or None)
        passphrase = env.get("RELEASE_GPG_PASSPHRASE") or None
        for artifact in artifacts:
            target = maven / artifact.relative_to(maven_stage)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(artifact, target)
            write_checksums(target)
            gpg(
                home,
                "--local-user",
                fingerprint,
                "--armor",
                "--detach-sign",
                "--output",
                f"{target}.asc",
                str(target),
                passphrase=passphrase,
            )
        (out / "signing-key.asc").write_text(gpg(home, "--armor", "--export", fingerprint).stdout)
    # The Central Portal's upload: the Maven layout from the group's folder down, in one zip.
    with zipfile.ZipFile(out / "central-bundle.zip", "w", zipfile.ZIP_DEFLATED) as bundle:
        for file in sorted(p for p in maven.rglob("*") if p.is_file()):
            bundle.write(file, file.relative_to(maven).as_posix())
    if pypi_stage.is_dir():
        (out / "pypi").mkdir()
        for dist in sorted(pypi_stage.iterdir()):
            if dist.suffix == ".whl" or dist.name.endswith(".tar.gz"):
                shutil.copy2(dist, out / "pypi" / dist.name)
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    print(f"release.py: signed with {fingerprint}; {len(written)} files in {out}")
    return written


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--stage", type=Path, default=Path("target/release-stage"))
    parser.add_argument("--out", type=Path, default=Path("target/release"))
    args = parser.parse_args(argv)
    try:
        release(args.stage, args.out, os.environ)
    except ReleaseError as e:
        print(f"release.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
