"""What may be indexed: exclusion by name, text decoding and sniffing, the secret check.

Whether a file may be indexed is one decision from the name, content and secret rules, each
giving a reason string of one vocabulary (`read_indexable` for a file on disk, the same
content checks for an open buffer in `project/index.py`).

Rules from docs/reference.md §3.9 ("Project indexing exclusions"): ignored directories, binary
extensions, minified assets and source maps, lockfiles and secret file names are excluded by
name (`path_exclusion`); binary and badly malformed content and minified text are excluded by
content (`decode_text`), and so is anything that looks like a private key or a real credential
(`secret_reason`, from `ds4_core.privacy.secrets`: the one set of secret patterns the index
and secret redaction share). `read_indexable` puts the content checks together for one file
on disk and never raises: one bad file never stops a run.

Reasons are short, stable strings meant for logs and status reports. They never contain the
secret that triggered them.
"""

from __future__ import annotations

import codecs
import errno
import os
import re
import stat
from pathlib import Path

from ..lines import split_lines
from ..logs import errno_name
from ..privacy.secrets import HEURISTIC_LINE_CHARS, secret_reason

IGNORED_DIRECTORIES = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".pi",
        ".cache",
        ".idea",
        ".vscode",
        "node_modules",
        "vendor",
        "dist",
        "build",
        "coverage",
        "target",
        "bin",
        "obj",
        ".next",
        ".nuxt",
        ".venv",
        "venv",
        "__pycache__",
    }
)
"""Directory names never indexed, at any level (docs/reference.md §3.9)."""

BINARY_EXTENSIONS = frozenset(
    {
        ".7z", ".a", ".avi", ".bmp", ".class", ".db", ".dll", ".dylib", ".eot", ".exe",
        ".gif", ".gz", ".ico", ".jar", ".jpeg", ".jpg", ".mov", ".mp3", ".mp4", ".o",
        ".otf", ".pdf", ".png", ".pyc", ".so", ".sqlite", ".tar", ".tgz", ".ttf", ".wav",
        ".webm", ".webp", ".woff", ".woff2", ".xz", ".zip",
    }
)  # fmt: skip
"""Extensions of binary formats (docs/reference.md §3.9), compared case-insensitively."""

LOCKFILE_NAMES = frozenset(
    {
        "bun.lock",
        "bun.lockb",
        "cargo.lock",
        "composer.lock",
        "flake.lock",
        "package-lock.json",
        "packages.lock.json",
        "pnpm-lock.yaml",
        "poetry.lock",
        "yarn.lock",
    }
)
"""Lockfile names (docs/reference.md §3.9), compared case-insensitively (`Cargo.lock`)."""

SECRET_FILE_NAMES = frozenset(
    {
        ".dockercfg",
        ".env",
        ".git-credentials",
        ".htpasswd",
        ".netrc",
        ".npmrc",
        ".pgpass",
        ".pypirc",
        "_netrc",
        "credentials",
        "credentials.json",
        "credentials.yaml",
        "credentials.yml",
        "gshadow",
        "gshadow-",
        "id_dsa",
        "id_ecdsa",
        "id_ecdsa_sk",
        "id_ed25519",
        "id_ed25519_sk",
        "id_rsa",
        "secrets.json",
        "secrets.yaml",
        "secrets.yml",
        "shadow",
        "shadow-",
    }
)
"""File names that hold credentials, compared case-insensitively (docs/reference.md §3.9, plus:
git's credential store `.git-credentials`, PostgreSQL's `.pgpass`, Apache's `.htpasswd`,
`_netrc` (the Windows `.netrc`), the system password hashes `shadow` and `gshadow` (and their
`-` backups), the other OpenSSH private key names and Docker's `.dockercfg`); `.env.*` is
matched separately."""

SECRET_FILE_STEMS = frozenset({"git-credentials", "htpasswd", "netrc", "pgpass"})
"""Credential file names that are also secret without their leading dot (`htpasswd`, `netrc`),
as PostgreSQL's Windows `pgpass.conf` (with `.conf`) or as a suffix
(`deploy.git-credentials`)."""

BACKUP_SUFFIXES = (
    ".bak", ".backup", ".bkp", ".old", ".orig", ".save", ".saved", ".swp", ".tmp", ".copy",
    "-bak", "-backup", "-old", "-orig", "-copy", "~", "-",
)  # fmt: skip
"""Suffixes of backup and editor copies, dropped (repeatedly, with a trailing `.1`-style
number) before a name is compared with the secret file names: `.netrc.bak`, `.pgpass.old`,
`.htpasswd-old`, `id_rsa~`, `credentials.json.orig`."""

_BACKUP_NUMBER = re.compile(r"[.\-_][0-9]{1,3}\Z")

SECRET_EXTENSIONS = frozenset({".key", ".pem", ".p12", ".pfx", ".jks", ".keystore"})
"""Extensions of key and certificate stores (docs/reference.md §3.9)."""

SNIFF_BYTES = 8192
"""A NUL byte in this many leading bytes marks a file as binary (docs/reference.md §3.9)."""

MAX_CONTROL_RATIO = 0.05
"""More than this share of control bytes (< 7, or 14..31) marks a file as binary."""

MAX_LINE_CHARS = HEURISTIC_LINE_CHARS
"""A line longer than this many characters (5,000) is overlong (the project index cuts it,
`windows.cut_long_lines`); the secret check's assignment and password rules read exactly
this much of each line (`privacy.secrets.HEURISTIC_LINE_CHARS`, the one definition)."""

MAX_LONG_CHAR_SHARE = 0.9
"""Overlong lines holding more than this share of a file's characters, with fewer than
`MIN_KEPT_WORDS` words in its other lines, mark it as minified: cutting them would leave
nothing worth searching (a one-line bundle). A data URI in an ordinary file leaves its code."""

MIN_KEPT_WORDS = 3
"""Words (runs of 2+ letters, digits or `_`) the lines that are not overlong must hold for a
file made mostly of overlong lines to be indexed with them cut rather than skipped."""

MAX_MEAN_LINE_CHARS = 1000
"""A mean length of the other lines above this many characters marks a file as minified."""

_UTF8_BOM = codecs.BOM_UTF8
_UTF32_BOMS = (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)
_UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
# Bytes 0-6 and 14-31: not tab, LF, VT, FF, CR (7-13), which are normal in text.
_CONTROL_BYTES = bytes([*range(0, 7), *range(14, 32)])
_CONTROL_CHARS = re.compile("[\x00-\x06\x0e-\x1f]")


def path_exclusion(rel_path: str) -> str | None:
    """Return why `rel_path` is excluded by its name alone, or None when it may be indexed.

    `rel_path` is a POSIX path relative to the project root; a trailing `/` marks a directory
    (only its components are then checked as directories). Checks, in order: a directory
    component in `IGNORED_DIRECTORIES` (`ignored directory <name>`), lockfiles (`lockfile`),
    secret file names and key-store extensions (`secret file name`), `*.min.js` / `*.min.css`
    (`minified`), `*.map` (`source map`) and binary extensions (`binary extension <.ext>`).
    Names are compared case-insensitively, so `Cargo.lock` and `IMAGE.PNG` are excluded too.
    """
    is_dir = rel_path.endswith("/")
    parts = [part for part in rel_path.split("/") if part]
    if not parts:
        return None
    directories = parts if is_dir else parts[:-1]
    for part in directories:
        if part in IGNORED_DIRECTORIES:
            return f"ignored directory {part}"
    if is_dir:
        return None
    name = parts[-1].lower()
    if name in LOCKFILE_NAMES:
        return "lockfile"
    if _is_secret_file_name(name):
        return "secret file name"
    suffix = os.path.splitext(name)[1]
    if suffix in SECRET_EXTENSIONS:
        return "secret file name"
    if name.endswith((".min.js", ".min.css")):
        return "minified"
    if suffix == ".map":
        return "source map"
    if suffix in BINARY_EXTENSIONS:
        return f"binary extension {suffix}"
    return None


def _is_secret_file_name(name: str) -> bool:
    """Whether the lower-cased file `name` is a credential file's: one of `SECRET_FILE_NAMES`
    or `.env.*`, also as a backup copy (`BACKUP_SUFFIXES`: `.netrc.bak`, `.htpasswd-old`,
    `id_rsa.orig`), and the `SECRET_FILE_STEMS` without their dot (`htpasswd`, `netrc`), with
    `.conf` (`pgpass.conf`) or after a dot (`work.git-credentials`)."""
    if name.startswith(".env."):
        return True
    while True:
        if name in SECRET_FILE_NAMES:
            return True
        stem = name.removeprefix(".").removesuffix(".conf")
        if stem in SECRET_FILE_STEMS or name.endswith(".git-credentials"):
            return True
        shorter = _BACKUP_NUMBER.sub("", name)
        if shorter == name:
            shorter = next((name[: -len(s)] for s in BACKUP_SUFFIXES if name.endswith(s)), name)
        if shorter == name or not shorter:
            return False
        name = shorter


def decode_text(data: bytes) -> tuple[str | None, str | None]:
    """Decode file bytes as indexable text: `(text, None)`, or `(None, reason)`.

    - A UTF-8 byte order mark is dropped; UTF-16 with a byte order mark is decoded (either
      endianness); UTF-32 is refused (`unsupported encoding UTF-32`).
    - `binary`: a NUL byte in the first 8 KiB, or more than 5% control bytes (byte < 7 or
      13 < byte < 32; for UTF-16, the same code points after decoding).
    - `malformed text`: more than max(2, len(text) / 200) U+FFFD characters after decoding
      with `errors="replace"`.
    - `minified`: the lines longer than 5,000 characters hold more than 90% of the
      characters and the other lines fewer than 3 words (runs of 2+ word characters): cutting
      the long lines would leave nothing worth searching; or a mean length above 1,000 of
      the lines that are not overlong. Lines end at `\\n`, `\\r\\n` or `\\r` only.

    Rules from docs/reference.md §3.9, except that the reference calls a file with any line
    over 5,000 characters minified: here such lines (a data URI) are cut by the index
    (`windows.cut_long_lines`) and the rest of the file stays searchable, unless there is
    no rest. The empty file decodes to `""`.
    """
    if data.startswith(_UTF32_BOMS):
        return None, "unsupported encoding UTF-32"
    if data.startswith(_UTF16_BOMS):
        text = data.decode("utf-16", errors="replace")
        if len(_CONTROL_CHARS.findall(text)) > MAX_CONTROL_RATIO * max(1, len(text)):
            return None, "binary"
    else:
        if data.startswith(_UTF8_BOM):
            data = data[len(_UTF8_BOM) :]
        if b"\x00" in data[:SNIFF_BYTES]:
            return None, "binary"
        control = len(data) - len(data.translate(None, _CONTROL_BYTES))
        if control > MAX_CONTROL_RATIO * max(1, len(data)):
            return None, "binary"
        text = data.decode("utf-8", errors="replace")
    if text.count("\ufffd") > max(2, len(text) / 200):
        return None, "malformed text"
    if _is_minified(text):
        return None, "minified"
    return text, None


def _is_minified(text: str) -> bool:
    if not text:
        return False
    lines = split_lines(text)
    if lines[-1] == "":
        lines.pop()  # a final line break does not start another line
    if not lines:
        return False
    lengths = list(map(len, lines))
    if max(lengths) <= MAX_LINE_CHARS:  # the common case, with C loops: every line is normal
        return sum(lengths) / len(lengths) > MAX_MEAN_LINE_CHARS
    normal = [line for line in lines if len(line) <= MAX_LINE_CHARS]
    normal_chars = sum(len(line) for line in normal)
    long_chars = sum(len(line) for line in lines) - normal_chars
    if long_chars > MAX_LONG_CHAR_SHARE * (long_chars + normal_chars):
        words = 0
        for line in normal:
            words += len(_WORD.findall(line))
            if words >= MIN_KEPT_WORDS:
                break
        if words < MIN_KEPT_WORDS:
            return True  # little but the overlong lines: nothing to keep once they are cut
    return bool(normal) and normal_chars / len(normal) > MAX_MEAN_LINE_CHARS


_WORD = re.compile(r"\w{2,}")
"""A word for `MIN_KEPT_WORDS`."""


def read_indexable(abs_path: Path, *, max_file_bytes: int) -> tuple[str | None, str | None]:
    """Read one file for indexing: `(text, None)`, or `(None, reason)`. Never raises.

    Never follows a symbolic link (`symlink`), refuses anything but a regular file (`not a
    regular file`) and files over `max_file_bytes` bytes (`oversized`, checked before and
    while reading), then applies `decode_text` and `secret_reason` (the reason is then
    `secret: <kind>`). An operating-system error gives `unreadable: <errno name>`, e.g.
    `unreadable: EACCES`.
    """
    try:
        info = os.lstat(abs_path)
        if stat.S_ISLNK(info.st_mode):
            return None, "symlink"
        if not stat.S_ISREG(info.st_mode):
            return None, "not a regular file"
        if info.st_size > max_file_bytes:
            return None, "oversized"
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        fd = os.open(abs_path, flags)
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return None, "not a regular file"  # replaced between lstat and open
            data = handle.read(max_file_bytes + 1)
    except OSError as error:
        if error.errno == errno.ELOOP:
            return None, "symlink"  # became a symlink between lstat and open (O_NOFOLLOW)
        return None, f"unreadable: {errno_name(error)}"
    except ValueError:
        return None, "unreadable: invalid path"  # e.g. an embedded NUL character
    if len(data) > max_file_bytes:
        return None, "oversized"
    text, reason = decode_text(data)
    if text is None:
        return None, reason
    secret = secret_reason(text)
    if secret is not None:
        return None, f"secret: {secret}"
    return text, None
