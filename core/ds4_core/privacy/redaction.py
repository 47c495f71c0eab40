"""Secret redaction for remote destinations (docs/reference.md §3.8 "Secret redaction",
docs/privacy.md).

`redact_secrets(text)` replaces the secrets of a text with fixed markers, in the reference's
order, then every other secret value the shared detector (`privacy.secrets`, the patterns
that also keep files out of the project index) recognises:

1. PEM private key blocks -> `[DS4 REDACTED PRIVATE KEY]`;
2. provider keys -> `[DS4 REDACTED CREDENTIAL]`: the reference's shapes (`sk-` and `sk-ant-`
   + 8 or more key characters, `gh[pousr]_` + 12 or more, `AKIA` + 16) and every provider
   key format of the detector (`secret_reason`'s list: GitLab, Slack, Stripe, Google, ...);
3. `Bearer <token>` (8 or more token characters) -> `Bearer [DS4 REDACTED TOKEN]`;
4. `api_key|apikey|access_token|auth_token|client_secret|password` then `:` or `=` and a value
   of 4 or more characters -> `<key>=[DS4 REDACTED SECRET]`, quotes kept around the marker
   (`<value>` standing for the secret):
   `password: "<value>"` -> `password="[DS4 REDACTED SECRET]"`,
   `"api_key": '<value>'` -> `"api_key"='[DS4 REDACTED SECRET]'`,
   `DB_PASSWORD=<value>` -> `DB_PASSWORD=[DS4 REDACTED SECRET]`;
5. every remaining secret span (`secret_spans`: passwords in URLs, `.netrc` and `.pgpass`
   entries, assignments to other secret names, passwords in comments, prose and connection
   strings) -> `[DS4 REDACTED SECRET]`.

Each step reads the text as it came (a step never hides a secret from a later one by
rewriting the words around it; where two steps' spans overlap, the earlier step's wins), and a
secret value of `MIN_ECHOED_CHARS` or more found anywhere is also replaced wherever else it
occurs. The steps run again over their own output until nothing changes (`MAX_PASSES`).

Placeholders never count, by the detector's one rule (`sk-...`, `<your key>`, `${API_KEY}`,
`password=changeme`, `YOUR_TOKEN`, a value ending in `...`), nor do values that are code
(`password=None`, `password=self.password`, `api_key=os.getenv(...)`, the type of an
annotation: `password: bytes,`), nor, in the reference's `sk-` shape, lower-case words
joined by hyphens (`sk-ssh-ed25519`, an OpenSSH key type).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import NamedTuple

from .secrets import (
    _BARE_REFERENCE,
    _BARE_WORDS,
    _ELLIPSES,
    _IDENTIFIER,
    _NAME_WORDS,
    TOKEN_KINDS,
    SecretSpan,
    _anchored_matches,
    _AnchorText,
    _bearer_tokens,
    _is_placeholder,
    _key_spans,
    _merged,
    _private_key_blocks,
    may_hold_secret,
    secret_spans,
)

PRIVATE_KEY_MARKER = "[DS4 REDACTED PRIVATE KEY]"
CREDENTIAL_MARKER = "[DS4 REDACTED CREDENTIAL]"
TOKEN_MARKER = "[DS4 REDACTED TOKEN]"
SECRET_MARKER = "[DS4 REDACTED SECRET]"

MAX_PASSES = 8
"""Redaction runs its steps again on its own output until nothing changes (a replacement can
end a value that hid a secret after it), at most this many times; a text still changing then
is replaced whole by `SECRET_MARKER` (kind `unresolved`): fail closed."""

MIN_ECHOED_CHARS = 8
"""A secret value this long or longer is also replaced where it occurs without the context
that made it a secret (the same password pasted again in a sentence)."""

MAX_ECHOED_VALUES = 64
"""At most this many distinct secret values are looked for elsewhere (one `str.find` scan
each: the bound keeps a text with thousands of secrets linear)."""


class Redacted(NamedTuple):
    """The result of `redact_secrets`: the redacted `text`, the number of secrets replaced
    (`count`) and that number per kind (`by_kind`: the detector's reason strings, such as
    `OpenAI key`, `bearer token`, `secret assignment (password)`; never a value)."""

    text: str
    count: int  # type: ignore[assignment]  # shadows tuple.count on purpose
    by_kind: dict[str, int]


# The reference's key shapes (step 2), beside the detector's provider formats.
_REFERENCE_KEYS = (
    (re.compile(r"\bsk-ant-(?P<body>[A-Za-z0-9_\-]{8,}+)"), (b"sk-",), "Anthropic key"),
    (re.compile(r"\bsk-(?P<body>[A-Za-z0-9_\-]{8,}+)"), (b"sk-",), "OpenAI key"),
    (re.compile(r"\bgh[pousr]_(?P<body>[A-Za-z0-9]{12,}+)"), (b"gh",), "GitHub token"),
    (re.compile(r"\bAKIA(?P<body>[A-Z0-9]{16})\b"), (b"AKIA",), "AWS access key id"),
)
# `Bearer <token>` of the reference (step 3): 8 or more token characters.
_BEARER = re.compile(r"(?i)(?P<keyword>bearer)[ \t]+(?P<value>[A-Za-z0-9\-._~+/]{8,}+=*)")
_BEARER_ANCHORS = (b"bearer",)
# The reference's assignments (step 4); the key may end a longer name (`DB_PASSWORD`) and be
# quoted (`"password": ...`); a value is quoted (any characters but quotes on one line) or
# bare (no spaces, quotes or code punctuation, not followed by `(` or `[`: a call).
_ASSIGNMENT = re.compile(
    r"""(?ix)
    (?<![a-z0-9])
    (?P<key>api_key|apikey|access_token|auth_token|client_secret|password)
    (?P<key_quote>["']?)
    (?P<sep>[ \t]*(?::=|=>|[:=])[ \t]*)
    (?:
      (?P<quote>["'`])(?P<quoted>[^"'`\r\n]{4,})(?P=quote)
    |
      (?P<bare>[^\s"'`,;&()\[\]{}<>=][^\s"'`,;&()\[\]{}<>]{3,}+)(?![(\[])
    )
    """
)
# Words that start an expression in code, not a secret: an assignment to a key name whose value
# begins with `await`, `new` or `yield` computes the key.
_CODE_WORDS = frozenset(
    {"await", "new", "yield", "typeof", "function", "lambda", "async", "this", "self",
     "return", "not", "require", "import", "static", "const", "let", "var"}
)  # fmt: skip
# After a type annotation's type: `,`, `)`, `|`, `=`, `]` (`password: bytes,`).
_ANNOTATION_END = re.compile(r"[ \t]*[,)|=\]]")
_ASSIGNMENT_ANCHORS = (b"api_key", b"apikey", b"access_token", b"auth_token", b"client_secret",
                       b"password")  # fmt: skip

_MARKERS = {
    "private key": PRIVATE_KEY_MARKER,
    "bearer token": TOKEN_MARKER,
    **{kind: CREDENTIAL_MARKER for kind in TOKEN_KINDS},
}


def redact_secrets(text: str) -> Redacted:
    """`text` with its secrets replaced by markers, in the order of docs/reference.md §3.8
    (see the module docstring for the steps, the patterns and the exact output forms).

    Guarantees: the result holds nothing the shared detector calls a secret
    (`secret_reason(result.text) is None`, so the project index would not flag it either);
    redacting the result again changes nothing (idempotent); a text without secrets comes
    back unchanged, at once when no pattern's anchor occurs in it. Never raises on any
    `str` (lone surrogates, NUL characters, megabytes); linear in the text's length per pass
    (`MAX_PASSES`).
    """
    if not may_hold_secret(text):
        return Redacted(text, 0, {})
    counts: Counter[str] = Counter()
    known: dict[str, str] = {}
    for _ in range(MAX_PASSES):
        redacted = _redaction_pass(text, counts, known)
        if redacted == text:
            return Redacted(text, sum(counts.values()), dict(counts))
        text = redacted
    if secret_spans(text) or _redaction_pass(text, Counter(), {}) != text:
        counts["unresolved"] += 1
        text = SECRET_MARKER
    return Redacted(text, sum(counts.values()), dict(counts))


def _redaction_pass(text: str, counts: Counter[str], known: dict[str, str]) -> str:
    """The five steps once over `text`, counting each replacement in `counts`.

    Every step reads `text` as it is (so a step never hides a secret from a later one by
    rewriting the words around it); where spans overlap, the earlier step's wins: a later
    step's span is dropped, except that the parts of a detector span (step 5) outside the
    kept spans are replaced too, so no character of a secret value is left. Then every other
    occurrence of a secret value found (`known`, value -> kind, kept across passes: 8 or more
    characters, at most `MAX_ECHOED_VALUES` of them) is replaced too: a password quoted once
    after `password=` and once in a sentence goes in both places."""
    replacements: list[_Replacement] = []
    blocks = _private_key_blocks(text, _AnchorText(text))
    replacements = _add(
        replacements, [_Replacement(span, PRIVATE_KEY_MARKER, value="") for span in blocks]
    )
    replacements = _add(
        replacements, [_Replacement(span, CREDENTIAL_MARKER) for span in _keys(text)]
    )
    replacements = _add(replacements, _bearers(text))
    replacements = _add(replacements, _assignments(text))
    spans = [
        _Replacement(span, _MARKERS.get(span.kind, SECRET_MARKER)) for span in secret_spans(text)
    ]
    replacements = _add(replacements, spans, split=True)
    for item in replacements:
        value = text[item.span.start : item.span.end] if item.value is None else item.value
        if len(value) >= MIN_ECHOED_CHARS and len(known) < MAX_ECHOED_VALUES:
            known.setdefault(value, item.span.kind)
    replacements = _add(replacements, _echoes(text, known), split=True)
    return _replace(text, replacements, counts)


def _echoes(text: str, known: dict[str, str]) -> list[_Replacement]:
    """Every occurrence in `text` of the values of `known`, longest value first where two
    overlap; sorted, non-overlapping."""
    found = []
    for value, kind in known.items():
        start = text.find(value)
        while start >= 0:
            found.append(SecretSpan(start, start + len(value), kind))
            start = text.find(value, start + len(value))
    found.sort(key=lambda span: (span.start, -span.end))
    echoes: list[_Replacement] = []
    for span in found:
        if not echoes or echoes[-1].span.end <= span.start:
            echoes.append(_Replacement(span, _MARKERS.get(span.kind, SECRET_MARKER)))
    return echoes


class _Replacement(NamedTuple):
    """`span` of the text becomes `text`; `counted`: False for the second and later parts of
    one detector span cut around other replacements (counted once); `value`: the secret in
    the span when it is not the whole span (`""`: none to look for elsewhere)."""

    span: SecretSpan
    text: str
    counted: bool = True
    value: str | None = None


def _add(
    kept: list[_Replacement], added: Iterable[_Replacement], *, split: bool = False
) -> list[_Replacement]:
    """`kept` (sorted, non-overlapping) with the replacements of `added` (sorted,
    non-overlapping) that overlap none of it; with `split`, an overlapping one is cut into
    its parts outside `kept` (each replaced alone) instead of dropped. Sorted; linear but
    for the final sort."""
    result = list(kept)
    index = 0
    for item in added:
        span = item.span
        while index < len(kept) and kept[index].span.end <= span.start:
            index += 1
        last = index
        while last < len(kept) and kept[last].span.start < span.end:
            last += 1
        if last == index:
            result.append(item)
            continue
        if not split:
            continue
        cursor = span.start
        counted = True
        for other in kept[index:last]:
            if other.span.start > cursor:
                piece = SecretSpan(cursor, other.span.start, span.kind)
                result.append(_Replacement(piece, item.text, counted, item.value))
                counted = False
            cursor = max(cursor, other.span.end)
        if cursor < span.end:
            piece = SecretSpan(cursor, span.end, span.kind)
            result.append(_Replacement(piece, item.text, counted, item.value))
    result.sort(key=lambda replacement: replacement.span.start)
    return result


def _keys(text: str) -> list[SecretSpan]:
    """Step 2's spans: the detector's provider keys and the reference's shapes, merged."""
    anchor_text = _AnchorText(text)
    spans = list(_key_spans(text, anchor_text))
    for pattern, anchors, kind in _REFERENCE_KEYS:
        for match in _anchored_matches(pattern, text, anchor_text.starts(anchors)):
            body = match.group("body")
            if _is_placeholder(body, token=True) or text.startswith(_ELLIPSES, match.end()):
                continue  # `sk-your-key-here`, `sk-ant-api03-...`
            if "-" in body and not any(char.isupper() for char in body):
                continue  # lower-case words: `sk-ssh-ed25519` (OpenSSH), `sk-x-altquot`
            spans.append(SecretSpan(match.start(), match.end(), kind))
    return _merged(spans)


def _bearers(text: str) -> list[_Replacement]:
    """Step 3: `Bearer <token>` -> `Bearer [DS4 REDACTED TOKEN]` (the keyword as written), for
    a token the detector accepts or of 8 or more characters with a letter and a digit that is
    not a placeholder."""
    anchor_text = _AnchorText(text)
    accepted = {match.start("value") for match in _bearer_tokens(text, anchor_text)}
    spans = []
    for match in _anchored_matches(_BEARER, text, anchor_text.starts(_BEARER_ANCHORS, folded=True)):
        value = match.group("value")
        loose = (
            any(char.isdigit() for char in value)
            and any(char.isalpha() for char in value)
            and not _is_placeholder(value)
        )
        if loose or match.start("value") in accepted:
            span = SecretSpan(match.start(), match.end(), "bearer token")
            replacement = f"{match.group('keyword')} {TOKEN_MARKER}"
            spans.append(_Replacement(span, replacement, value=value))
    return spans


def _assignments(text: str) -> list[_Replacement]:
    """Step 4: the reference's assignments -> `<key>=[DS4 REDACTED SECRET]` (quotes kept),
    unless the value is a placeholder or code (`None`, `self.password`, `password2`, `await`
    in `apiKey = await getApiKey(model)`)."""
    anchor_text = _AnchorText(text)
    starts = anchor_text.starts(_ASSIGNMENT_ANCHORS, folded=True)
    spans = []
    for match in _anchored_matches(_ASSIGNMENT, text, starts):
        quoted = match.group("quoted")
        value = quoted if quoted is not None else match.group("bare")
        if _is_placeholder(value) or value.lower() in _BARE_WORDS:
            continue
        if quoted is None and (
            value in _CODE_WORDS
            or _BARE_REFERENCE.match(value)
            or (_IDENTIFIER.match(value) and any(word in value.lower() for word in _NAME_WORDS))
        ):
            continue
        if (
            quoted is None
            and match.group("sep").strip() == ":"
            and value.isalpha()
            and _ANNOTATION_END.match(text, match.end())
        ):
            continue  # a type annotation: `password: bytes,`, `api_key: SecretStr = None`
        key = match.group("key")
        quote = match.group("quote") or ""
        span = SecretSpan(match.start(), match.end(), f"secret assignment ({key.lower()})")
        replacement = f"{key}{match.group('key_quote')}={quote}{SECRET_MARKER}{quote}"
        spans.append(_Replacement(span, replacement, value=value))
    return spans


def _replace(text: str, spans: list[_Replacement], counts: Counter[str]) -> str:
    """`text` with each span (sorted, non-overlapping) replaced by its replacement; each
    counted in `counts` under its kind (the parts of one split span once)."""
    if not spans:
        return text
    pieces = []
    end = 0
    for span, replacement, counted, _value in spans:
        pieces.append(text[end : span.start])
        pieces.append(replacement)
        if counted:
            counts[span.kind] += 1
        end = span.end
    pieces.append(text[end:])
    return "".join(pieces)
