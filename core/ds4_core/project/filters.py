"""What may be indexed: exclusion by name, text decoding and sniffing, secret detection.

Rules from ds4-reference.md 3.9 ("Project indexing exclusions"): ignored directories, binary
extensions, minified assets and source maps, lockfiles and secret file names are excluded by
name (`path_exclusion`); binary and badly malformed content, minified text and anything that
looks like a private key or a real credential are excluded by content (`decode_text`,
`secret_reason`). `read_indexable` puts the content checks together for one file on disk and
never raises: one bad file never stops a run.

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
"""Directory names never indexed, at any level (ds4-reference.md 3.9)."""

BINARY_EXTENSIONS = frozenset(
    {
        ".7z", ".a", ".avi", ".bmp", ".class", ".db", ".dll", ".dylib", ".eot", ".exe",
        ".gif", ".gz", ".ico", ".jar", ".jpeg", ".jpg", ".mov", ".mp3", ".mp4", ".o",
        ".otf", ".pdf", ".png", ".pyc", ".so", ".sqlite", ".tar", ".tgz", ".ttf", ".wav",
        ".webm", ".webp", ".woff", ".woff2", ".xz", ".zip",
    }
)  # fmt: skip
"""Extensions of binary formats (ds4-reference.md 3.9), compared case-insensitively."""

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
"""Lockfile names (ds4-reference.md 3.9), compared case-insensitively (`Cargo.lock`)."""

SECRET_FILE_NAMES = frozenset(
    {
        ".env",
        ".netrc",
        ".npmrc",
        ".pypirc",
        "credentials",
        "credentials.json",
        "credentials.yaml",
        "credentials.yml",
        "id_dsa",
        "id_ed25519",
        "id_rsa",
        "secrets.json",
        "secrets.yaml",
        "secrets.yml",
    }
)
"""File names that hold credentials (ds4-reference.md 3.9); `.env.*` is matched separately."""

SECRET_EXTENSIONS = frozenset({".key", ".pem", ".p12", ".pfx", ".jks", ".keystore"})
"""Extensions of key and certificate stores (ds4-reference.md 3.9)."""

SNIFF_BYTES = 8192
"""A NUL byte in this many leading bytes marks a file as binary (ds4-reference.md 3.9)."""

MAX_CONTROL_RATIO = 0.05
"""More than this share of control bytes (< 7, or 14..31) marks a file as binary."""

MAX_LINE_CHARS = 5000
"""A line longer than this many characters marks a file as minified."""

MAX_MEAN_LINE_CHARS = 1000
"""A mean line length above this many characters marks a file as minified."""

_UTF8_BOM = codecs.BOM_UTF8
_UTF32_BOMS = (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)
_UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
# Bytes 0-6 and 14-31: not tab, LF, VT, FF, CR (7-13), which are normal in text.
_CONTROL_BYTES = bytes([*range(0, 7), *range(14, 32)])
_CONTROL_CHARS = re.compile("[\x00-\x06\x0e-\x1f]")
_LINE_BREAK = re.compile("\r\n|\r|\n")

_PRIVATE_KEY = re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")
_TOKENS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"), "AWS access key id"),
    (re.compile(r"\bghp_[A-Za-z0-9]{20,}"), "GitHub token"),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"), "GitHub token"),
    (re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}"), "GitLab token"),
    (re.compile(r"\bxox[baprs]-[A-Za-z0-9\-]{10,}"), "Slack token"),
)
# `name = "value"`, `name: 'value'`, `"name": "value"`, `name: str = "value"`, `['name'] => 'v'`;
# the name may end a longer identifier (`DB_PASSWORD`, `githubToken`, `apiKey`).
_SECRET_ASSIGNMENT = re.compile(
    r"""(?ix)
    (?<![A-Za-z0-9])
    [A-Za-z0-9_.\-]*?
    (?P<name>api[_\-]?key|authorization|client[_\-]?secret|password|private[_\-]?key|secret|token)
    (?:["']\]?|\])?
    (?:\s*:\s*[A-Za-z_][\w.\[\]| ]*?)?
    \s*(?::=|=>|[:=])\s*
    (?P<quote>["'`])
    (?P<value>[^"'`\r\n]{12,})
    (?P=quote)
    """
)
_PLACEHOLDER_WORDS = (
    "example",
    "placeholder",
    "redacted",
    "dummy",
    "changeme",
    "change_me",
    "change-me",
    "your_",
    "your-",
    "process.env",
    "${",
    "{{",
    "xxxx",
    "****",
)
_ANGLE_PLACEHOLDER = re.compile(r"<[^<>]*>")


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
    if name in SECRET_FILE_NAMES or name.startswith(".env."):
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


def decode_text(data: bytes) -> tuple[str | None, str | None]:
    """Decode file bytes as indexable text: `(text, None)`, or `(None, reason)`.

    - A UTF-8 byte order mark is dropped; UTF-16 with a byte order mark is decoded (either
      endianness); UTF-32 is refused (`unsupported encoding UTF-32`).
    - `binary`: a NUL byte in the first 8 KiB, or more than 5% control bytes (byte < 7 or
      13 < byte < 32; for UTF-16, the same code points after decoding).
    - `malformed text`: more than max(2, len(text) / 200) U+FFFD characters after decoding
      with `errors="replace"`.
    - `minified`: a line longer than 5,000 characters, or a mean line length above 1,000.
      Lines end at `\\n`, `\\r\\n` or `\\r` only.

    Rules from ds4-reference.md 3.9. The empty file decodes to `""`.
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
    lines = _LINE_BREAK.split(text)
    if lines[-1] == "":
        lines.pop()  # a final line break does not start another line
    if not lines:
        return False
    longest = max(len(line) for line in lines)
    mean = sum(len(line) for line in lines) / len(lines)
    return longest > MAX_LINE_CHARS or mean > MAX_MEAN_LINE_CHARS


def secret_reason(text: str) -> str | None:
    """Return why `text` looks like it holds a secret, or None.

    High-confidence signals only (ds4-reference.md 3.9): a PEM private key header; an AWS
    access key id (`AKIA`/`ASIA` + 16); GitHub (`ghp_`, `github_pat_`), GitLab (`glpat-`) and
    Slack (`xox[baprs]-`) tokens; and an assignment of `api_key`, `authorization`,
    `client_secret`, `password`, `private_key`, `secret` or `token` (also as the end of a
    longer name such as `DB_PASSWORD` or `githubToken`) to a quoted value of 12 or more
    characters, unless the value looks like a placeholder (`example`, `placeholder`,
    `redacted`, `dummy`, `changeme`, `your_`, `process.env`, `${VAR}`, `{{var}}`, `<value>`,
    `xxxx`, ...). Access key ids containing `EXAMPLE` (AWS documentation keys) are placeholders
    too.

    The reason names the kind of secret (e.g. `secret assignment (password)`), never the value.
    """
    if _PRIVATE_KEY.search(text):
        return "private key"
    for pattern, kind in _TOKENS:
        for match in pattern.finditer(text):
            if "EXAMPLE" not in match.group(0).upper():
                return kind
    for match in _SECRET_ASSIGNMENT.finditer(text):
        if not _is_placeholder(match.group("value")):
            name = match.group("name").lower().replace("-", "_")
            return f"secret assignment ({name})"
    return None


def _is_placeholder(value: str) -> bool:
    lowered = value.lower()
    if any(word in lowered for word in _PLACEHOLDER_WORDS):
        return True
    if _ANGLE_PLACEHOLDER.search(value):
        return True
    return len(set(value)) <= 2  # "************", "aaaaaaaaaaaa", "-----------"


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
        return None, f"unreadable: {_errno_name(error)}"
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


def _errno_name(error: OSError) -> str:
    if error.errno is None:
        return type(error).__name__
    return errno.errorcode.get(error.errno, str(error.errno))
