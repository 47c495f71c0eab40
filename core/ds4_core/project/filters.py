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
import heapq
import os
import re
import stat
from collections.abc import Iterator
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

# Secret detection is the costliest check on a large project, so no pattern scans the text.
# Every match of these patterns starts with a literal anchor; `bytes.find` locates anchors (in
# C, at memory speed) in a one-byte-per-character copy of the text (`_AnchorText`), and a
# pattern is only tried, anchored, where one occurs (`_anchored_matches`). The results are
# exactly those of `pattern.search` / `pattern.finditer` over the whole text.
_PRIVATE_KEY = re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")
_PRIVATE_KEY_ANCHORS = (b"-----BEGIN ",)
_TOKENS: tuple[tuple[re.Pattern[str], tuple[bytes, ...], str], ...] = (
    (re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"), (b"AKIA", b"ASIA"), "AWS access key id"),
    (re.compile(r"\bghp_[A-Za-z0-9]{20,}"), (b"ghp_",), "GitHub token"),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"), (b"github_pat_",), "GitHub token"),
    (re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}"), (b"glpat-",), "GitLab token"),
    (re.compile(r"\bxox[baprs]-[A-Za-z0-9\-]{10,}"), (b"xox",), "Slack token"),
)
# `name = "value"`, `name: 'value'`, `"name": "value"`, `name: str = "value"`, `['name'] => 'v'`;
# the name may end a longer identifier (`DB_PASSWORD`, `githubToken`, `apiKey`).
#
# The rule was first written as one scan, `(?<![A-Za-z0-9])[A-Za-z0-9_.\-]*?(?P<name>...)...`,
# whose lazy identifier prefix made it slow. That prefix never decides a result: it can always
# reach back to the start of its run of identifier characters (where the lookbehind holds), and
# a match ends with a quote, outside any such run. So the matches of the scan are found by
# trying the rest of it, below, at each occurrence of a name in turn, skipping occurrences
# inside the previous match (the reason only uses `name` and `value`).
_SECRET_ASSIGNMENT = re.compile(
    r"""(?ix)
    (?P<name>api[_\-]?key|authorization|client[_\-]?secret|password|private[_\-]?key|secret|token)
    (?:["']\]?|\])?
    (?:\s*:\s*[A-Za-z_][\w.\[\]| ]*?)?
    \s*(?::=|=>|[:=])\s*
    (?P<quote>["'`])
    (?P<value>[^"'`\r\n]{12,})
    (?P=quote)
    """
)
# Every name above starts with one of these, looked for in the case-folded copy of the text.
_SECRET_NAME_ANCHORS = (
    b"api",
    b"authorization",
    b"client",
    b"password",
    b"private",
    b"secret",
    b"token",
)
# The only non-ASCII characters that a case-insensitive pattern matches to an ASCII letter,
# with that letter (`(?i)[a-z]` over all of Unicode; a test keeps the list complete).
_CASE_FOLD_FIXES = (
    ("\u0130", ord("i")),
    ("\u0131", ord("i")),
    ("\u017f", ord("s")),
    ("\u212a", ord("k")),
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
# `<value>`, and template references: `{name}` (format strings), `%(name)s`, a bare `$NAME`.
_TEMPLATE_PLACEHOLDER = re.compile(
    r"<[^<>]*>|\{[A-Za-z_][\w.\[\]]*\}|%\([A-Za-z_]\w*\)s|^\$[A-Za-z_]\w*$"
)


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
    `redacted`, `dummy`, `changeme`, `your_`, `process.env`, `${VAR}`, `$VAR`, `{{var}}`,
    `{name}`, `%(name)s`, `<value>`, `xxxx`, ...). Access key ids containing `EXAMPLE` (AWS
    documentation keys) are placeholders too.

    The reason names the kind of secret (e.g. `secret assignment (password)`), never the value.
    """
    anchor_text = _AnchorText(text)
    if next(_anchored_matches(_PRIVATE_KEY, text, anchor_text.exact, _PRIVATE_KEY_ANCHORS), None):
        return "private key"
    for pattern, anchors, kind in _TOKENS:
        for match in _anchored_matches(pattern, text, anchor_text.exact, anchors):
            if "EXAMPLE" not in match.group(0).upper():
                return kind
    folded = anchor_text.folded()
    for match in _anchored_matches(_SECRET_ASSIGNMENT, text, folded, _SECRET_NAME_ANCHORS):
        if not _is_placeholder(match.group("value")):
            name = match.group("name").lower().replace("-", "_")
            return f"secret assignment ({name})"
    return None


class _AnchorText:
    """One byte per character of a text, so that `bytes.find` positions are text positions.

    `exact`: ASCII characters as they are, any other character (a lone surrogate included) as
    `?`. `folded()`: the same, lower-cased, except that the non-ASCII characters that a
    case-insensitive pattern matches to an ASCII letter (`_CASE_FOLD_FIXES`) are that letter;
    so `folded()[i]` is the lower-case letter `x` exactly when `(?i)x` matches `text[i]`.
    (`str.lower` would not do: it is slow on non-ASCII text, lowers `İ` to two characters and
    leaves `ı` and `ſ` as they are.)
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.exact = text.encode("ascii", errors="replace")

    def folded(self) -> bytes:
        folded = self.exact.lower()
        if self.text.isascii():
            return folded
        patched: bytearray | None = None
        for char, letter in _CASE_FOLD_FIXES:
            index = self.text.find(char)
            while index >= 0:
                if patched is None:
                    patched = bytearray(folded)
                patched[index] = letter
                index = self.text.find(char, index + 1)
        return folded if patched is None else bytes(patched)


def _anchored_matches(
    pattern: re.Pattern[str], text: str, haystack: bytes, anchors: tuple[bytes, ...]
) -> Iterator[re.Match[str]]:
    """What `pattern.finditer(text)` yields, for a pattern whose matches are never empty and
    always start where one of `anchors` occurs in `haystack` (an `_AnchorText` copy of `text`).

    The pattern is tried, anchored, at each occurrence of an anchor in order (`match` at a
    position still sees the characters before it, for lookbehinds and `\\b`); as with
    `finditer`, a match only counts if it starts at or after the end of the previous one.
    """
    end = 0
    for start in heapq.merge(*(_occurrences(haystack, anchor) for anchor in anchors)):
        if start < end:
            continue
        match = pattern.match(text, start)
        if match is not None:
            yield match
            end = match.end()


def _occurrences(haystack: bytes, anchor: bytes) -> Iterator[int]:
    index = haystack.find(anchor)
    while index >= 0:
        yield index
        index = haystack.find(anchor, index + 1)


def _is_placeholder(value: str) -> bool:
    lowered = value.lower()
    if any(word in lowered for word in _PLACEHOLDER_WORDS):
        return True
    if _TEMPLATE_PLACEHOLDER.search(value):
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
