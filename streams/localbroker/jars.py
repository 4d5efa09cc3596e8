"""The broker's jars: a checked-in lock file, and a fetch that needs nothing but Python.

The lock (``kafka-jars.lock.json`` beside this module) lists every jar of the broker's
classpath: group, artifact, version, its path in a Maven repository, its size and its
sha256. Maintainers regenerate it with ``spanguard kafka lock`` (which runs Maven on
``pom.xml``) when ``kafka.version`` changes; users never need Maven.

:func:`fetch_jars` downloads exactly the locked files with :mod:`urllib`:

- each file goes to ``<name>.jar.part`` first and becomes ``<name>.jar`` (one atomic
  rename) only after its size and sha256 match the lock; Java's ``lib/*`` classpath
  never picks up a ``.part`` file;
- an interrupted download resumes from its ``.part`` file with an HTTP ``Range`` request;
- a network or checksum failure raises :class:`JarError` naming the file and the cause;
- a directory that already holds every locked jar (recorded by a ``.fetched`` marker
  holding the lock's digest, checked against each file's size) touches no network.

The base URL is ``$SPANGUARD_JARS_URL`` when set (any Maven-layout repository: a mirror,
a proxy, ``file:///`` a copied repository), else Maven Central.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import http.client
import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath

from spanguard.streams.kafka_io.backoff import Backoff
from spanguard.streams.localbroker.errors import BrokerError

__all__ = [
    "BASE_URL_ENV",
    "DEFAULT_BASE_URL",
    "LOCK_FILE",
    "FetchReport",
    "JarError",
    "JarLock",
    "LockedJar",
    "base_url",
    "fetch_jars",
    "generate_lock",
    "jars_complete",
]

log = logging.getLogger(__name__)

#: The checked-in lock of the broker's classpath.
LOCK_FILE: Path = Path(__file__).resolve().with_name("kafka-jars.lock.json")
#: Where the jars come from unless ``$SPANGUARD_JARS_URL`` or an argument says otherwise.
DEFAULT_BASE_URL = "https://repo.maven.apache.org/maven2/"
#: Environment variable overriding :data:`DEFAULT_BASE_URL`.
BASE_URL_ENV = "SPANGUARD_JARS_URL"

_MARKER = ".fetched"
_LOCK_NAME = ".fetch.lock"
_PART_SUFFIX = ".part"
_CHUNK = 1 << 16
_SHA256 = re.compile(r"[0-9a-f]{64}")
_USER_AGENT = "spanguard-jar-fetch/1 (Python urllib)"
_LOCK_FORMAT = 1
_MVN_TIMEOUT_S = 1800.0
_EXCLUDED = "reload4j,slf4j-reload4j,slf4j-log4j12,log4j-slf4j-impl,log4j"


class JarError(BrokerError):
    """A jar could not be fetched or verified, or the lock file is unusable."""


@dataclass(frozen=True, slots=True)
class LockedJar:
    """One jar of the broker's classpath, as the lock pins it.

    Attributes:
        group: Maven group id, e.g. ``org.apache.kafka``.
        artifact: Maven artifact id, e.g. ``kafka_2.13``.
        version: Its version, e.g. ``4.1.1``.
        path: Its path under a Maven repository's base URL.
        size: Its length in bytes.
        sha256: Its SHA-256, lowercase hex.
        classifier: Maven classifier, usually empty.
    """

    group: str
    artifact: str
    version: str
    path: str
    size: int
    sha256: str
    classifier: str = ""

    @property
    def file_name(self) -> str:
        """The name it has in the jar directory (that of its repository path)."""
        return PurePosixPath(self.path).name

    def url(self, base: str) -> str:
        """Its URL under the repository ``base``."""
        return base.rstrip("/") + "/" + self.path

    def coordinates(self) -> str:
        """``group:artifact:version[:classifier]``."""
        suffix = f":{self.classifier}" if self.classifier else ""
        return f"{self.group}:{self.artifact}:{self.version}{suffix}"


@dataclass(frozen=True)
class JarLock:
    """The parsed lock file.

    Attributes:
        kafka_version: The Kafka version the classpath is for.
        jars: The locked jars, sorted by path.
        source: The file it was read from (``None`` when built in memory).
    """

    kafka_version: str
    jars: tuple[LockedJar, ...]
    source: Path | None = field(default=None, compare=False)

    @classmethod
    def load(cls, path: Path = LOCK_FILE) -> JarLock:
        """Read and validate a lock file.

        Raises:
            JarError: When it is missing, not JSON, or an entry is malformed (a bad
                checksum, a path leaving the repository, two jars with one file name).
        """
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            if data.get("format") != _LOCK_FORMAT:
                raise ValueError(
                    f"format {data.get('format')!r}, this spanguard reads {_LOCK_FORMAT}"
                )
            jars = tuple(LockedJar(**entry) for entry in data["jars"])
            lock = cls(kafka_version=str(data["kafka_version"]), jars=jars, source=Path(path))
        except OSError as exc:
            raise JarError(f"cannot read the jar lock {path}: {exc.strerror or exc}") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise JarError(f"the jar lock {path} is malformed: {exc!r}") from None
        lock.validate()
        return lock

    def validate(self) -> None:
        """Check every entry (see :meth:`load`)."""
        where = self.source or "the jar lock"
        if not self.jars:
            raise JarError(f"{where} lists no jars")
        names: set[str] = set()
        for jar in self.jars:
            parts = PurePosixPath(jar.path).parts
            if (
                not jar.path
                or jar.path.startswith("/")
                or "\\" in jar.path
                or any(part in ("", ".", "..") for part in parts)
                or not jar.file_name.endswith(".jar")
            ):
                raise JarError(f"{where}: {jar.coordinates()} has an unsafe path {jar.path!r}")
            if not _SHA256.fullmatch(jar.sha256):
                raise JarError(f"{where}: {jar.coordinates()} has no valid sha256")
            if not isinstance(jar.size, int) or jar.size <= 0:
                raise JarError(f"{where}: {jar.coordinates()} has no valid size")
            if jar.file_name in names:
                raise JarError(f"{where}: two jars are named {jar.file_name}")
            names.add(jar.file_name)

    def digest(self) -> str:
        """SHA-256 of the locked entries: what the ``.fetched`` marker of a complete copy holds."""
        canonical = json.dumps([asdict(jar) for jar in self.jars], sort_keys=True)
        return hashlib.sha256(canonical.encode()).hexdigest()

    def total_bytes(self) -> int:
        """The size of the whole classpath."""
        return sum(jar.size for jar in self.jars)

    def to_json(self) -> str:
        """The lock file's text."""
        body = {
            "comment": (
                "The local Kafka broker's classpath. Generated from pom.xml by "
                "`spanguard kafka lock` (make jars-lock); do not edit by hand."
            ),
            "format": _LOCK_FORMAT,
            "kafka_version": self.kafka_version,
            "jars": [asdict(jar) for jar in sorted(self.jars, key=lambda j: j.path)],
        }
        return json.dumps(body, indent=2) + "\n"


@dataclass
class FetchReport:
    """What :func:`fetch_jars` did.

    Attributes:
        lib_dir: The jar directory.
        downloaded: File names downloaded (completely or by resuming).
        bytes_downloaded: Bytes received over the network (resumed parts count once).
        verified: Jars that were already there and matched their sha256.
        removed: Files removed: jars not in the lock, corrupt jars, stale ``.part`` files.
        network: Whether any request was made.
        seconds: Wall time of the fetch.
    """

    lib_dir: Path
    downloaded: list[str] = field(default_factory=list)
    bytes_downloaded: int = 0
    verified: int = 0
    removed: list[str] = field(default_factory=list)
    network: bool = False
    seconds: float = 0.0


def base_url(explicit: str | None = None) -> str:
    """The repository to fetch from: ``explicit``, else ``$SPANGUARD_JARS_URL``, else Maven
    Central."""
    chosen = explicit or os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL
    if not chosen.startswith(("https://", "http://", "file://")):
        raise JarError(f"the jar repository URL {chosen!r} is not https://, http:// or file://")
    return chosen


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_atomically(path: Path, text: str) -> None:
    handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed below, before the rename
        "w", dir=path.parent, prefix=f".{path.name}.", suffix=".tmp", delete=False
    )
    try:
        with handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(handle.name, 0o644)  # readable like the jars beside it
        os.replace(handle.name, path)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


@contextlib.contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``path``, created with its folder if missing
    (two fetches never write one file; two brokers never start in one home)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def jars_complete(lock: JarLock, lib_dir: Path) -> bool:
    """True when ``lib_dir`` holds exactly the locked jars, as a finished fetch left them.

    Cheap (no hashing): the ``.fetched`` marker must hold the lock's digest (it is written
    only after every jar was verified), every locked jar must be there with its size, and
    no other jar may be on the classpath.
    """
    lib_dir = Path(lib_dir)
    try:
        if (lib_dir / _MARKER).read_text().strip() != lock.digest():
            return False
        for jar in lock.jars:
            if (lib_dir / jar.file_name).stat().st_size != jar.size:
                return False
    except OSError:
        return False
    expected = {jar.file_name for jar in lock.jars}
    return all(path.name in expected for path in lib_dir.glob("*.jar"))


class _Transient(Exception):
    """A failure worth another attempt (the ``.part`` file keeps what arrived)."""


class _Mismatch(Exception):
    """The downloaded bytes are not the locked ones."""


def _describe(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, urllib.error.URLError):
        return f"{exc.reason}"
    if isinstance(exc, TimeoutError):
        return "timed out"
    return str(exc) or type(exc).__name__


@dataclass
class _Received:
    """Bytes received for one jar, over all attempts (failed ones too)."""

    bytes: int = 0


def _download_once(
    jar: LockedJar, url: str, part: Path, timeout: float, received_total: _Received
) -> None:
    """Bring ``part`` to the jar's full length, resuming from what it holds.

    Raises:
        urllib.error.HTTPError: For an HTTP error status.
        _Transient: When the connection failed or closed early.
        _Mismatch: When the server sends more bytes than the jar has.
    """
    offset = part.stat().st_size if part.exists() else 0
    if offset >= jar.size:
        if offset > jar.size:
            part.unlink()
            offset = 0
        else:
            return  # complete already; the caller verifies it
    headers = {"User-Agent": _USER_AGENT}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    request = urllib.request.Request(url, headers=headers)
    received = 0
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status = getattr(response, "status", None)
            content_range = response.headers.get("Content-Range", "") if response.headers else ""
            if offset and status == 206 and content_range.startswith(f"bytes {offset}-"):
                mode = "ab"  # the server resumes where the part file ends
            else:
                offset, mode = 0, "wb"  # no resume (a 200, or a range we did not ask for)
            with part.open(mode) as out:
                while chunk := response.read(_CHUNK):
                    received += len(chunk)
                    received_total.bytes += len(chunk)
                    if offset + received > jar.size:
                        raise _Mismatch(f"the server sent more than the locked {jar.size} bytes")
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
    except urllib.error.HTTPError:
        raise
    except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
        raise _Transient(_describe(exc)) from exc
    if offset + received < jar.size:
        raise _Transient(f"the connection closed after {offset + received} of {jar.size} bytes")


def _fetch_one(
    jar: LockedJar,
    lib_dir: Path,
    base: str,
    *,
    attempts: int,
    timeout: float,
    retry_delay: float,
) -> int:
    """Download, verify and atomically install one jar; return the bytes received."""
    url = jar.url(base)
    part = lib_dir / (jar.file_name + _PART_SUFFIX)
    target = lib_dir / jar.file_name
    received = _Received()
    cause = "no attempt was made"
    for attempt in range(1, max(attempts, 1) + 1):
        resumed = part.exists() and part.stat().st_size > 0
        try:
            _download_once(jar, url, part, timeout, received)
            actual = _sha256_of(part)
            if part.stat().st_size != jar.size or actual != jar.sha256:
                raise _Mismatch(
                    f"sha256 {actual} ({part.stat().st_size} bytes) where the lock has "
                    f"{jar.sha256} ({jar.size} bytes)"
                )
        except urllib.error.HTTPError as exc:
            cause = _describe(exc)
            if exc.code == 416:  # our range is wrong for this server: start again from zero
                part.unlink(missing_ok=True)
            elif exc.code not in (408, 425, 429) and exc.code < 500:
                raise JarError(f"{jar.file_name}: download failed ({url}): {cause}") from None
        except _Transient as exc:
            cause = str(exc)
        except _Mismatch as exc:
            part.unlink(missing_ok=True)
            if not resumed:
                raise JarError(
                    f"{jar.file_name}: checksum mismatch, the download was discarded ({url}): {exc}"
                ) from None
            cause = f"checksum mismatch after resuming ({exc}); starting again from zero"
        else:
            os.replace(part, target)
            _fsync_dir(lib_dir)
            return received.bytes
        log.warning("%s: attempt %d of %d failed: %s", jar.file_name, attempt, attempts, cause)
        if attempt < attempts and retry_delay > 0:
            time.sleep(Backoff(retry_delay, 8 * retry_delay).delay(attempt))
    kept = part.stat().st_size if part.exists() else 0
    resume = (
        f"; {kept} bytes are kept in {part} and the next fetch resumes from there" if kept else ""
    )
    raise JarError(f"{jar.file_name}: download failed ({url}): {cause}{resume}")


def fetch_jars(
    lib_dir: Path,
    lock: JarLock | None = None,
    base: str | None = None,
    *,
    attempts: int = 3,
    timeout: float = 60.0,
    retry_delay: float = 1.0,
    verify: bool = False,
    on_download: Callable[[LockedJar, int], None] | None = None,
) -> FetchReport:
    """Make ``lib_dir`` hold exactly the locked jars, downloading only what is missing.

    Jars already there are checked against their sha256 (a corrupt one is downloaded
    again); jars the lock does not list are removed, so two versions never share the
    classpath. The ``.fetched`` marker is written last. When the directory is already
    complete (:func:`jars_complete`) nothing is hashed and no request is made.

    Args:
        lib_dir: The jar directory (created if missing).
        lock: The lock to satisfy (default: the checked-in :data:`LOCK_FILE`).
        base: Repository base URL (default: :func:`base_url`).
        attempts: Tries per jar on network failures; each resumes what the last one got.
        timeout: Socket timeout of each request, in seconds.
        retry_delay: Seconds before the second attempt, doubling after each next failure.
        verify: Check every present jar's sha256 even when the directory is marked complete
            (e.g. one copied from another machine); still no request when all match.
        on_download: Called with each jar downloaded and the bytes received for it.

    Raises:
        JarError: Naming the file and the cause, when a download fails or a checksum does
            not match. Completed jars stay; the failed one is never installed.
    """
    started = time.monotonic()
    lock = lock if lock is not None else JarLock.load()
    lib_dir = Path(lib_dir)
    report = FetchReport(lib_dir=lib_dir)
    if not verify and jars_complete(lock, lib_dir):
        report.verified = len(lock.jars)
        return report
    repository = base_url(base)
    try:
        lib_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise JarError(f"cannot create the jar directory {lib_dir}: {exc.strerror}") from None
    with exclusive(lib_dir / _LOCK_NAME):
        if not verify and jars_complete(lock, lib_dir):  # another process finished meanwhile
            report.verified = len(lock.jars)
            return report
        (lib_dir / _MARKER).unlink(missing_ok=True)
        locked = {jar.file_name for jar in lock.jars}
        for stale in sorted(lib_dir.glob("*.jar")) + sorted(lib_dir.glob("*.jar" + _PART_SUFFIX)):
            if stale.name.removesuffix(_PART_SUFFIX) not in locked:
                stale.unlink()
                report.removed.append(stale.name)
        for jar in lock.jars:
            target = lib_dir / jar.file_name
            if target.exists():
                if target.stat().st_size == jar.size and _sha256_of(target) == jar.sha256:
                    report.verified += 1
                    continue
                log.warning("%s does not match the lock; downloading it again", target)
                target.unlink()
                report.removed.append(jar.file_name)
            report.network = True
            received = _fetch_one(
                jar, lib_dir, repository, attempts=attempts, timeout=timeout,
                retry_delay=retry_delay,
            )  # fmt: skip
            report.downloaded.append(jar.file_name)
            report.bytes_downloaded += received
            if on_download is not None:
                on_download(jar, received)
        _write_atomically(lib_dir / _MARKER, lock.digest() + "\n")
    report.seconds = time.monotonic() - started
    return report


# --------------------------------------------------------------------------- lock generation


def _parse_dependency_list(text: str) -> list[tuple[str, str, str, str, Path]]:
    """``(group, artifact, version, classifier, local file)`` of ``dependency:list`` output."""
    scopes = {"compile", "runtime", "provided", "system", "test"}
    found: list[tuple[str, str, str, str, Path]] = []
    for raw in text.splitlines():
        line = raw.strip().split(" -- ", 1)[0].strip()
        if line.count(":") < 5 or line.startswith("The following"):
            continue
        fields = line.split(":", 6)
        if len(fields) == 7 and fields[5] in scopes:
            group, artifact, kind, classifier, version, _scope, local = fields
        else:
            group, artifact, kind, version, _scope, local = line.split(":", 5)
            classifier = ""
        if kind != "jar":
            raise JarError(f"{group}:{artifact}:{version} is a {kind}, not a jar")
        found.append((group, artifact, version, classifier, Path(local)))
    return found


def _published_sha1(url: str, timeout: float) -> str:
    request = urllib.request.Request(url + ".sha1", headers={"User-Agent": _USER_AGENT})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body: bytes = response.read(4096)
    except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
        raise JarError(f"cannot read the published checksum {url}.sha1: {_describe(exc)}") from None
    return body.decode("ascii", "replace").split()[0].strip().lower() if body.strip() else ""


def generate_lock(
    pom: Path,
    out: Path = LOCK_FILE,
    *,
    base: str | None = None,
    check_published: bool = True,
    maven_repo: Path | None = None,
    timeout: float = 60.0,
) -> JarLock:
    """Resolve ``pom``'s runtime classpath with Maven and write the lock (maintainers only).

    Runs ``mvn dependency:list`` (strict checksums) on ``pom``, hashes every resolved jar,
    and, with ``check_published``, compares each jar's SHA-1 with the one the repository
    publishes beside it before trusting it.

    Args:
        pom: The POM whose dependencies form the classpath (the project's ``pom.xml``).
        out: Where to write the lock.
        base: The repository the lock's paths are checked against (default: :func:`base_url`).
        check_published: Compare with the repository's published ``.sha1`` files.
        maven_repo: A local Maven repository to use instead of ``~/.m2/repository``.
        timeout: Socket timeout for the published checksums.

    Raises:
        JarError: When Maven is missing or fails, or a checksum disagrees.
    """
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JarError("generating the jar lock needs Maven ('mvn' on PATH); fetching does not")
    repository = base_url(base)
    with tempfile.TemporaryDirectory(prefix="spanguard-lock-") as scratch:
        listing = Path(scratch) / "dependencies.txt"
        cmd = [
            mvn, "-q", "-B", "--strict-checksums", "-Dstyle.color=never", "-f", str(pom),
            "dependency:list", "-DincludeScope=runtime", "-DoutputAbsoluteArtifactFilename=true",
            f"-DexcludeArtifactIds={_EXCLUDED}", f"-DoutputFile={listing}",
        ]  # fmt: skip
        if maven_repo is not None:
            cmd.append(f"-Dmaven.repo.local={maven_repo}")
        try:
            result = subprocess.run(
                cmd, cwd=Path(pom).parent, stdin=subprocess.DEVNULL, capture_output=True,
                text=True, timeout=_MVN_TIMEOUT_S, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            raise JarError(f"Maven did not finish within {_MVN_TIMEOUT_S:.0f} s") from None
        if result.returncode != 0 or not listing.is_file():
            output = (result.stdout + result.stderr).strip()[-4000:]
            raise JarError(f"Maven failed to resolve {pom} (exit {result.returncode}):\n{output}")
        resolved = _parse_dependency_list(listing.read_text())
    jars: list[LockedJar] = []
    for group, artifact, version, classifier, local in resolved:
        name = f"{artifact}-{version}" + (f"-{classifier}" if classifier else "") + ".jar"
        if local.name != name:
            raise JarError(f"{local} is not named {name} as its repository path would be")
        jar = LockedJar(
            group=group,
            artifact=artifact,
            version=version,
            classifier=classifier,
            path=f"{group.replace('.', '/')}/{artifact}/{version}/{name}",
            size=local.stat().st_size,
            sha256=_sha256_of(local),
        )
        if check_published:
            published = _published_sha1(jar.url(repository), timeout)
            local_sha1 = hashlib.sha1(local.read_bytes()).hexdigest()
            if published != local_sha1:
                raise JarError(
                    f"{name}: the local copy's sha1 {local_sha1} differs from the published "
                    f"{published!r} ({jar.url(repository)}.sha1)"
                )
        jars.append(jar)
    kafka = [jar.version for jar in jars if jar.artifact.startswith("kafka_")]
    if not kafka:
        raise JarError(f"{pom} resolved no kafka_<scala> jar")
    lock = JarLock(kafka_version=kafka[0], jars=tuple(sorted(jars, key=lambda j: j.path)))
    lock.validate()
    _write_atomically(Path(out), lock.to_json())
    return JarLock.load(Path(out))
