"""Secret shapes redaction adds for remote destinations beyond the shared detector: the
values of secret-named command-line options, of secret-named keys in JSON text, and of
assignments whose quote never closes (docs/privacy.md "Secret redaction", step 6).

The index does not use these (a file holding `--password "$PW"` is ordinary code); text going
to a remote model may lose a little too much, never a secret. Every value found here is at
least 4 characters and does not start with `[DS4 ` (redaction also skips whole-value
placeholders), so a
redacted text is found clean on a second pass (redaction stays idempotent).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .secrets import SecretSpan

_NAMES = (
    r"pass(?:word|wd|phrase)?|pwd?|secret|token|api[_\-]?key|access[_\-]?key|private[_\-]?key"
    r"|client[_\-]?secret|auth[_\-]?token|credentials?|cookie|signing[_\-]?key"
    r"|connection[_\-]?string"
)
# `--password VALUE`, `--api-key=VALUE` is the detector's: here the value after a space (a
# shell line, a tool's argv as JSON: `"--password", "VALUE"`).
_OPTION = re.compile(
    rf"""(?ix)(?<![\w\-])--?(?:{_NAMES})(?P<gap>"?,[ \t]*"|[ \t]+)(?!\[DS4[ ])(?!-)
    (?P<value>[^\s"'`,;|&<>()]{{4,}})"""
)
# `"pw": "VALUE"`, `"signingKey":"VALUE"`, `\"token\": \"VALUE\"` (JSON text, also escaped
# inside another JSON string), the key ending with a secret's name.
_JSON_KEY = re.compile(
    rf"""(?ix)(?P<q>\\?")[\w\-]{{0,40}}?(?:{_NAMES})(?P=q)[ \t]*:[ \t]*(?P=q)(?!\[DS4[ ])
    (?P<value>(?:(?!(?P=q))[^\r\n]){{4,512}}?)(?P=q)"""
)
# `password="VALUE` with no closing quote on its line (cut or truncated output): to the end
# of the line.
_UNCLOSED = re.compile(
    rf"""(?ix)(?<![\w])(?:{_NAMES})["']?[ \t]*[:=][ \t]*(?P<q>["'`])(?!\[DS4[ ])
    (?P<value>[^"'`\r\n]{{4,}})$""",
    re.MULTILINE,
)


def extra_secret_spans(text: str) -> Iterator[SecretSpan]:
    """The value spans of the shapes above in `text`, in order of the rules (they may
    overlap; redaction keeps the first, and skips whole-value placeholders)."""
    for pattern, kind in (
        (_OPTION, "secret option"),
        (_JSON_KEY, "secret-named JSON key"),
        (_UNCLOSED, "unclosed secret value"),
    ):
        for match in pattern.finditer(text):
            if match.group("value").startswith("$"):
                continue  # a variable: `--password "$PW"`
            yield SecretSpan(match.start("value"), match.end("value"), kind)
