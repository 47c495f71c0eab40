"""Secret redaction for remote destinations (docs/reference.md §3.8 "Secret redaction",
docs/privacy.md).

`redact_secrets(text)` replaces the secrets of a text with fixed markers, in the reference's
order, then every other secret value the shared detector (`privacy.secrets`, the patterns
that also keep files out of the project index) recognises:

1. PEM private key blocks -> `[DS4 REDACTED PRIVATE KEY]` (a block without its `END` line:
   to the end of the text, or to the first `"` after it, which ends the JSON string it is in);
2. provider keys -> `[DS4 REDACTED CREDENTIAL]`: the reference's shapes (`sk-` and `sk-ant-`
   + 8 or more key characters, `gh[pousr]_` + 12 or more, `AKIA` + 16) and every provider
   key format of the detector (`secret_reason`'s list: GitLab, Slack, Stripe, Google, ...);
3. `Bearer <token>` -> `Bearer [DS4 REDACTED TOKEN]`. The rule in one sentence: `Bearer`
   then 8 or more token characters is a token when the token holds a letter and a digit, or
   whatever it holds when `Bearer` follows an `Authorization` header name (`Authorization:`,
   `"Authorization": "`) or a curl `-H` / `--header` option; so prose such as "Bearer
   authentication" or "Bearer tokens" stays;
4. `api_key|apikey|access_token|auth_token|client_secret|password|passwd|passphrase` then
   `:`, `=`, `:=` or `=>` and a value of 4 or more characters: the value alone ->
   `[DS4 REDACTED SECRET]`, the key, separator and quotes kept as written (`<value>` standing
   for the secret): `"apiKey": "<value>"` -> `"apiKey": "[DS4 REDACTED SECRET]"`,
   `password: <value>` -> `password: [DS4 REDACTED SECRET]`, `DB_PASSWORD=<value>` ->
   `DB_PASSWORD=[DS4 REDACTED SECRET]`. This differs on purpose from the reference's
   `<key>=[...]` form: it keeps JSON, YAML and code valid. A quoted value runs to the same
   quote (`password="ab'cd12"`; backslash escapes and JSON's `\\"` kept together); after a
   `password`, `passwd` or `passphrase` key an unquoted value with spaces runs to the end of
   the line, a `;`, `,` or `"` (`password: correct horse battery staple`), unless it is code
   (brackets, `=`, `|`, words such as `await`, `if`, `or`); `password is <value>` in prose
   counts when the value is password-shaped;
5. every remaining secret span (`secret_spans`: passwords in URLs, `.netrc` and `.pgpass`
   entries, assignments to other secret names, passwords in comments, prose and connection
   strings) -> `[DS4 REDACTED SECRET]`; a URL's password also when the host is an example
   host (the index keeps those files; a remote model is not sent the password).

Each step reads the text as it came (a step never hides a secret from a later one by
rewriting the words around it; where two steps' spans overlap, the earlier step's wins and the
secret is counted once), and a secret value of `MIN_ECHOED_CHARS` or more found anywhere is
also replaced wherever else it occurs. The steps run again over their own output until
nothing changes (`MAX_PASSES`). A JSON document (a tool's output) stays valid JSON: the
markers hold no quote or backslash, a replacement never cuts a backslash escape in two nor
takes the closing quote of a string, a bare value after a JSON key becomes a quoted marker
(`"pin": 12345678` -> `"pin": "[DS4 REDACTED SECRET]"`), and a value read across strings
becomes one string (`["password=", 0, "x"]` -> `["password=", "[DS4 REDACTED SECRET]", "x"]`).

Redaction is stricter than the index filter (a miss is a leak, a little too much replaced is
cheap): a placeholder only counts when it is the WHOLE value (`is_whole_placeholder`:
`changeme`, `<your key>`, `${API_KEY}`, `$API_KEY`, `{{token}}`, `sk-...`, a value ending in
`...`, `xxxx` runs, `****`, one or two distinct characters, words only such as
`your_api_key`, `YOUR_TOKEN`, `example`, `dummy`); a value that merely contains such a word
and otherwise looks like a password (`MyExamplePass2024!`, `changeme-R7x9q2LmP`) is
redacted. Values that are code are left alone (`password=None`, `password=self.password`,
`api_key=os.getenv(...)`, the type of an annotation: `password: bytes,`), and so, in the
reference's `sk-` shape, are lower-case words joined by hyphens (`sk-ssh-ed25519`, an OpenSSH
key type).

One module: the steps share one replacement list whose overlaps, counts and JSON-safe
boundaries are settled in one place (`_add`, `_replace`); split up, a step could replace text
another step's span already covers, or cut a JSON string.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import NamedTuple

from .secrets import (
    BARE_REFERENCE,
    BARE_WORDS,
    ELLIPSES,
    NAME_WORDS,
    PLACEHOLDER_WORDS,
    TOKEN_KINDS,
    TRIVIAL_URL_PASSWORDS,
    URL_ANCHORS,
    URL_CREDENTIALS,
    AnchorText,
    SecretSpan,
    anchored_matches,
    bearer_tokens,
    is_placeholder,
    key_spans,
    may_hold_secret,
    merged_spans,
    password_shaped,
    private_key_blocks,
    secret_spans,
)
from .shapes import extra_secret_spans

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
    `OpenAI key`, `bearer token`, `secret assignment (password)`; never a value). A secret
    found by two rules (a step's span and a detector span over the same value) counts once."""

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
_BEARER = re.compile(r"(?i)bearer[ \t]+(?P<value>[A-Za-z0-9\-._~+/]{8,}+=*)")
_BEARER_ANCHORS = (b"bearer",)
# Right before `Bearer` on its line: an `Authorization` header name and its separator, or a
# curl `-H` / `--header` option (read in the last `_HEADER_CONTEXT_CHARS` characters).
_HEADER_CONTEXT = re.compile(
    r"(?i)(?:authorization[\"']?[ \t]*[:=][ \t]*[\"']?|(?:^|[ \t])(?:-H|--header)[ \t]*[\"']?)"
    r"[ \t]*\Z"
)
_HEADER_CONTEXT_CHARS = 48
# The reference's assignments (step 4), widened to `passwd` and `passphrase`; the key may end
# a longer name (`DB_PASSWORD`) and be quoted (`"password": ...`); a value is quoted (to the
# same quote on the line, escapes kept whole; also JSON's escaped `\"...\"`) or bare (no
# spaces, quotes or code punctuation, an `&` only when no `name=` follows it: a URL's query;
# not followed by `(` or `[`: a call).
_ASSIGNMENT = re.compile(
    r"""(?ix)
    (?<![a-z0-9])
    (?P<key>api_key|apikey|access_token|auth_token|client_secret|password|passwd|passphrase)
    (?P<key_quote>\\?["']?)
    (?P<sep>[ \t]*(?::=|=>|[:=])[ \t]*)
    (?:
      "(?P<dq>(?:\\[^\r\n]|[^"\\\r\n]){1,512}+)"
    | '(?P<sq>(?:\\[^\r\n]|[^'\\\r\n]){1,512}+)'
    | `(?P<bq>[^`\r\n]{1,512}+)`
    | \\"(?P<eq>(?:[^"\\\r\n]|\\[^"\r\n]){1,512}?)\\"
    |
      (?P<bare>[^\s"'`,;&()\[\]{}<>=\\]
        (?:[^\s"'`,;&()\[\]{}<>\\]|&(?![A-Za-z_][\w.\-]*=)){3,}+)(?![(\[=])
    )
    """
)
# Words that start an expression in code, not a secret: an assignment to a key name whose value
# begins with `await`, `new` or `yield` computes the key.
_CODE_WORDS = frozenset(
    {"await", "new", "yield", "typeof", "function", "lambda", "async", "this", "self",
     "return", "not", "require", "import", "static", "const", "let", "var"}
)  # fmt: skip
# Words of an expression in a passphrase-shaped value: `password = user.password or ""`.
_OPERATOR_WORDS = frozenset({"if", "else", "or", "and", "for", "in", "is", "as", "of"})
# After a type annotation's type: `,`, `)`, `|`, `=`, `]` (`password: bytes,`).
_QUOTED_GROUPS = ("dq", "sq", "bq", "eq")
_ANNOTATION_END = re.compile(r"[ \t]*[,)|=\]]")
_ASSIGNMENT_ANCHORS = (b"api_key", b"apikey", b"access_token", b"auth_token", b"client_secret",
                       b"password", b"passwd", b"passphrase")  # fmt: skip
# Step 4, an unquoted value with spaces after a password key, to the end of the line, a `;`,
# `,` or `"` (`_VALUE_END`, at most `_MAX_PASSPHRASE_CHARS` on: longer is prose), then checked
# (`_passphrases`).
_PASSPHRASE = re.compile(
    r"""(?ix)
    (?<![a-z0-9])(?:password|passwd|passphrase)["']?[ \t]*(?::=|[:=])[ \t]*(?=[^\s"'`;,])
    """
)
_VALUE_END = re.compile(r'[;,"\r\n]')
_MAX_PASSPHRASE_CHARS = 200
_PASSPHRASE_ANCHORS = (b"passw", b"passphrase")
# Step 4, prose: `password is <value>` (the value password-shaped, `password_shaped`).
_PASSWORD_IS = re.compile(
    r"(?i)(?<![a-z0-9])(?:password|passwd|passphrase)[ \t]+is[ \t]+(?P<value>[^\s\"'`]{6,80})"
)
# Another variable (`password2`, `db_password_v2`, `dbPassword`): word parts of letters, each
# maybe followed by digits (`your_password_here_123Xy` is not one).
_VARIABLE = re.compile(r"_*[A-Za-z]+[0-9]*(?:_+[A-Za-z]+[0-9]*)*_*\Z")
_CODE_CHARACTERS = frozenset("()[]{}<>=|+'`")
_TRAILERS = ".,;:)]}"

# Whole-value placeholders (`is_whole_placeholder`): template references, and words only.
_TEMPLATE_VALUE = re.compile(
    r"<[^<>]*>|\$\{[^{}]*\}|\$\([^()]*\)|\$[A-Za-z_]\w*|\{\{[^{}]*\}\}|\{[A-Za-z_][\w.\[\]]*\}"
    r"|%\([A-Za-z_]\w*\)s|%s"
)
_WORDS_ONLY = re.compile(r"[A-Za-z][A-Za-z_.\- ]*\Z")
_MASK_RUN = re.compile(r"[xX*]{4,}")
_PLACEHOLDER_STARTS = ("your", "my_", "my-", "insert", "enter", "put_", "put-", "add_", "add-")
_SCHEME = re.compile(r"(?i)[ \t]*(?:bearer|basic|token)[ \t]+")
_NUMBER = re.compile(r"-?[0-9][0-9.eE+\-]*\Z")
ANY_MARKER = re.compile(r"\[DS4 REDACTED (?:PRIVATE KEY|CREDENTIAL|TOKEN|SECRET)\]")
"""Any marker redaction writes."""

_MARKERS = {
    "private key": PRIVATE_KEY_MARKER,
    "bearer token": TOKEN_MARKER,
    **{kind: CREDENTIAL_MARKER for kind in TOKEN_KINDS},
}


def is_whole_placeholder(value: str) -> bool:
    """Whether `value` as a whole only stands for a secret (redaction's placeholder rule,
    stricter than the detector's `is_placeholder`, which also refuses a value that merely
    contains a placeholder word): a template reference (`<your key>`, `${API_KEY}`,
    `$API_KEY`, `{{token}}`, `{name}`, `%(name)s`); a value ending in `...` or `…` (`sk-...`);
    one or two distinct characters (`****`, `aaaaaaaa`); `xxxx` or `****` runs with no digit
    beside them (`xxxx-xxxx`, `sk-proj-xxxxxxxx`); only letters, `_`, `-`, `.` and spaces
    holding a placeholder word or starting with `your` / `my_` / `insert` / `enter`
    (`your_api_key`, `YOUR_TOKEN`, `example`, `changeme`, `dummy`, `redacted`,
    `replace-me`); or only redaction markers (`[DS4 REDACTED SECRET]`). `MyExamplePass2024!`
    and `changeme-R7x9q2LmP` are not placeholders."""
    value = value.strip().strip("\"'`")
    if not value or len(set(value)) <= 2 or value.endswith(ELLIPSES):
        return True
    if _TEMPLATE_VALUE.fullmatch(value) or not any(
        char.isalnum() for char in ANY_MARKER.sub("", value)
    ):
        return True
    if _MASK_RUN.search(value) and not any(char.isdigit() for char in _MASK_RUN.sub("", value)):
        return True
    if _WORDS_ONLY.match(value):
        lowered = value.lower()
        return lowered.startswith(_PLACEHOLDER_STARTS) or any(
            word in lowered for word in PLACEHOLDER_WORDS
        )
    return False


def redact_secrets(text: str) -> Redacted:
    """`text` with its secrets replaced by markers, in the order of docs/reference.md §3.8
    (see the module docstring for the steps, the patterns and the exact output forms).

    Guarantees: the result holds nothing the shared detector calls a secret
    (`secret_reason(result.text) is None`, so the project index would not flag it either);
    redacting the result again changes nothing (idempotent); a text without secrets comes
    back unchanged, at once when no pattern's anchor occurs in it; a JSON document stays
    valid JSON. Never raises on any `str` (lone surrogates, NUL characters, megabytes);
    linear in the text's length per pass (`MAX_PASSES`).
    """
    return redact_with_values(text)[0]


def redact_with_values(text: str) -> tuple[Redacted, tuple[str, ...]]:
    """`redact_secrets(text)` and the secret values it replaced (`MIN_ECHOED_CHARS` or more
    characters, not numbers): a caller looks for them in other texts that go to the same
    place (the same password repeated bare in another message)."""
    if not may_hold_secret(text):
        return Redacted(text, 0, {}), ()
    counts: Counter[str] = Counter()
    known: dict[str, str] = {}
    for _ in range(MAX_PASSES):
        redacted = _redaction_pass(text, counts, known)
        if redacted == text:
            return Redacted(text, sum(counts.values()), dict(counts)), tuple(known)
        text = redacted
    if secret_spans(text) or _redaction_pass(text, Counter(), {}) != text:
        counts["unresolved"] += 1
        text = SECRET_MARKER
    return Redacted(text, sum(counts.values()), dict(counts)), tuple(known)


def _redaction_pass(text: str, counts: Counter[str], known: dict[str, str]) -> str:
    """The five steps once over `text`, counting each replacement in `counts`.

    Every step reads `text` as it is (so a step never hides a secret from a later one by
    rewriting the words around it); where spans overlap, the earlier step's wins: a later
    step's span is dropped, except that the parts of a detector span (step 5) outside the
    kept spans are replaced too (not counted again), so no character of a secret value is
    left. Then every other occurrence of a secret value found (`known`, value -> kind, kept
    across passes: 8 or more characters, at most `MAX_ECHOED_VALUES` of them) is replaced
    too: a password quoted once after `password=` and once in a sentence goes in both
    places."""
    anchor_text = AnchorText(text)
    replacements: list[_Replacement] = []
    blocks = _private_key_spans(text, anchor_text)
    replacements = _add(
        replacements, [_Replacement(span, PRIVATE_KEY_MARKER, value="") for span in blocks]
    )
    replacements = _add(
        replacements, [_Replacement(span, CREDENTIAL_MARKER) for span in _keys(text, anchor_text)]
    )
    replacements = _add(replacements, _bearers(text, anchor_text))
    replacements = _add(replacements, _passphrases(text, anchor_text))
    replacements = _add(replacements, _assignments(text, anchor_text))
    replacements = _add(replacements, _url_passwords(text, anchor_text))
    replacements = _add(
        replacements,
        [
            _Replacement(span, SECRET_MARKER)
            for span in extra_secret_spans(text)
            if not is_whole_placeholder(text[span.start : span.end])
        ],
    )
    spans = [
        _Replacement(span, _MARKERS.get(span.kind, SECRET_MARKER))
        for span in secret_spans(text)
        if span.kind != "private key"  # step 1's, cut at the end of a JSON string
    ]
    replacements = _add(replacements, spans, split=True, text=text)
    for item in replacements:
        value = text[item.span.start : item.span.end] if item.value is None else item.value
        if (
            len(value) >= MIN_ECHOED_CHARS
            and len(known) < MAX_ECHOED_VALUES
            and not _NUMBER.match(value)  # a number may be any field's value
        ):
            known.setdefault(value, item.span.kind)
    replacements = _add(replacements, _echoes(text, known), split=True, text=text)
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
    """`span` of the text becomes `text`; `counted`: False for the parts of a span cut around
    other replacements (the secret is counted where it was kept); `value`: the secret in the
    span when it is not the whole span (`""`: none to look for elsewhere)."""

    span: SecretSpan
    text: str
    counted: bool = True
    value: str | None = None


def _add(
    kept: list[_Replacement],
    added: Iterable[_Replacement],
    *,
    split: bool = False,
    text: str = "",
) -> list[_Replacement]:
    """`kept` (sorted, non-overlapping) with the replacements of `added` (sorted,
    non-overlapping) that overlap none of it; with `split`, an overlapping one is cut into
    its parts outside `kept` (each replaced alone, none counted: the secret is counted in
    `kept`; a piece of `text` that is only an authorization scheme, `Bearer `, is left as it
    is) instead of dropped. Sorted; linear but for the final sort."""
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
        for other in kept[index:last]:
            if other.span.start > cursor and not _SCHEME.fullmatch(text, cursor, other.span.start):
                piece = SecretSpan(cursor, other.span.start, span.kind)
                result.append(_Replacement(piece, item.text, False, item.value))
            cursor = max(cursor, other.span.end)
        if cursor < span.end:
            piece = SecretSpan(cursor, span.end, span.kind)
            result.append(_Replacement(piece, item.text, False, item.value))
    result.sort(key=lambda replacement: replacement.span.start)
    return result


def _private_key_spans(text: str, anchor_text: AnchorText) -> list[SecretSpan]:
    """Step 1: the detector's private key blocks; one without its `END` line runs to the end
    of the text or to the first `"` after it (a PEM body holds none: that `"` ends the JSON
    string the key was pasted in)."""
    spans = []
    for span in private_key_blocks(text, anchor_text):
        if span.end == len(text) and not text.endswith("-----"):
            quote = text.find('"', span.start, span.end)
            if quote >= 0:
                span = span._replace(end=quote)
        spans.append(span)
    return spans


def _keys(text: str, anchor_text: AnchorText) -> list[SecretSpan]:
    """Step 2's spans: the detector's provider keys and the reference's shapes, merged."""
    spans = list(key_spans(text, anchor_text))
    for pattern, anchors, kind in _REFERENCE_KEYS:
        for match in anchored_matches(pattern, text, anchor_text.starts(anchors)):
            body = match.group("body")
            if is_placeholder(body, token=True) or text.startswith(ELLIPSES, match.end()):
                continue  # `sk-your-key-here`, `sk-ant-api03-...`, AWS's `...EXAMPLE`
            if "-" in body and not any(char.isupper() for char in body):
                continue  # lower-case words: `sk-ssh-ed25519` (OpenSSH), `sk-x-altquot`
            spans.append(SecretSpan(match.start(), match.end(), kind))
    return merged_spans(spans)


def _bearers(text: str, anchor_text: AnchorText) -> list[_Replacement]:
    """Step 3: the token of `Bearer <token>` -> `[DS4 REDACTED TOKEN]`, for a token the
    detector accepts, or of 8 or more characters that holds a letter and a digit, or after an
    `Authorization` header name or a `-H` / `--header` option; never a whole-value
    placeholder (`YOUR_TOKEN`, `xxxxxxxx`)."""
    accepted = {match.start("value") for match in bearer_tokens(text, anchor_text)}
    spans = []
    starts = anchor_text.starts(_BEARER_ANCHORS, folded=True)
    for match in anchored_matches(_BEARER, text, starts):
        value = match.group("value")
        if is_whole_placeholder(value):
            continue
        start = match.start()
        context = text[max(0, start - _HEADER_CONTEXT_CHARS) : start]
        context = context[max(context.rfind("\n"), context.rfind("\r")) + 1 :]  # its line
        if (
            match.start("value") in accepted
            or (any(char.isdigit() for char in value) and any(char.isalpha() for char in value))
            or _HEADER_CONTEXT.search(context)
        ):
            span = SecretSpan(*match.span("value"), "bearer token")
            spans.append(_Replacement(span, TOKEN_MARKER))
    return spans


def _passphrases(text: str, anchor_text: AnchorText) -> list[_Replacement]:
    """Step 4, redaction's own: an unquoted value with spaces after a `password`, `passwd` or
    `passphrase` key (`_PASSPHRASE`; `password: correct horse battery staple`), unless it is
    code (`_CODE_CHARACTERS`, `_OPERATOR_WORDS`, a first word that is code or a reference)
    or a placeholder; and `password is <value>` in prose, the value password-shaped."""
    spans = []
    starts = anchor_text.starts(_PASSPHRASE_ANCHORS, folded=True)
    for match in anchored_matches(_PASSPHRASE, text, starts):
        value_start = match.end()
        limit = value_start + _MAX_PASSPHRASE_CHARS + 1
        value_end = _VALUE_END.search(text, value_start, limit)
        if value_end is None and limit < len(text):
            continue  # runs on: prose
        value = text[value_start : value_end.start() if value_end else len(text)]
        for comment in (" #", "\t#", " //"):
            value = value.partition(comment)[0]
        value = value.rstrip(" \t" + _TRAILERS)
        words = value.split()
        if len(words) < 2 or any(char in _CODE_CHARACTERS for char in value):
            continue  # one word: the assignment rule's; brackets, `=`, `|`: code
        first = words[0].lower()
        if first in _CODE_WORDS or first in BARE_WORDS or BARE_REFERENCE.match(words[0]):
            continue
        if _VARIABLE.match(words[0]) and any(word in first for word in NAME_WORDS):
            continue  # `passwd = passwd or default`
        if any(word.lower() in _OPERATOR_WORDS for word in words) or is_whole_placeholder(value):
            continue
        span = SecretSpan(value_start, value_start + len(value), _assignment_kind(match))
        spans.append(_Replacement(span, SECRET_MARKER))
    starts = anchor_text.starts(_PASSPHRASE_ANCHORS, folded=True)
    for match in anchored_matches(_PASSWORD_IS, text, starts):
        value = match.group("value").rstrip(_TRAILERS)
        if password_shaped(value) and not is_whole_placeholder(value):
            value_start = match.start("value")
            span = SecretSpan(value_start, value_start + len(value), "password in text")
            spans.append(_Replacement(span, SECRET_MARKER))
    spans.sort(key=lambda item: (item.span.start, -item.span.end))
    kept: list[_Replacement] = []
    for item in spans:
        if not kept or kept[-1].span.end <= item.span.start:
            kept.append(item)
    return kept


def _assignment_kind(match: re.Match[str]) -> str:
    key = match.group(0).lower()
    for name in ("passphrase", "passwd", "password"):
        if key.startswith(name):
            return f"secret assignment ({name})"
    return "secret assignment (password)"


def _assignments(text: str, anchor_text: AnchorText) -> list[_Replacement]:
    """Step 4: the value of the reference's assignments -> `[DS4 REDACTED SECRET]` (key,
    separator and quotes kept), unless the value is a whole-value placeholder or code
    (`None`, `self.password`, `password2`, `await` in `apiKey = await getApiKey(model)`)."""
    starts = anchor_text.starts(_ASSIGNMENT_ANCHORS, folded=True)
    spans = []
    for match in anchored_matches(_ASSIGNMENT, text, starts):
        group = next((name for name in _QUOTED_GROUPS if match.group(name) is not None), "bare")
        quoted = None if group == "bare" else match.group(group)
        value = quoted if quoted is not None else match.group("bare")
        if len(value) < 4 or is_whole_placeholder(value) or value.lower() in BARE_WORDS:
            continue
        if quoted is None and (
            value in _CODE_WORDS
            or BARE_REFERENCE.match(value)
            or (_VARIABLE.match(value) and any(word in value.lower() for word in NAME_WORDS))
        ):
            continue
        if (
            quoted is None
            and match.group("sep").strip() == ":"
            and value.isalpha()
            and _ANNOTATION_END.match(text, match.end())
        ):
            continue  # a type annotation: `password: bytes,`, `api_key: SecretStr = None`
        kind = f"secret assignment ({match.group('key').lower()})"
        marker = SECRET_MARKER
        if quoted is None and match.group("key_quote") == '"':
            marker = f'"{SECRET_MARKER}"'  # `"pin": 12345678`: JSON stays JSON
        spans.append(_Replacement(SecretSpan(*match.span(group), kind), marker))
    return spans


def _url_passwords(text: str, anchor_text: AnchorText) -> list[_Replacement]:
    """Step 5, redaction's own: the password of `scheme://user:password@host` whatever the
    host (the detector leaves example hosts to the index), unless it is a well-known default
    (`password`, `changeme`), the user name again or a whole-value placeholder."""
    spans = []
    for match in anchored_matches(URL_CREDENTIALS, text, anchor_text.starts(URL_ANCHORS)):
        password = match.group("password")
        if (
            len(password) < 3
            or password.lower() in TRIVIAL_URL_PASSWORDS
            or password == match.group("user")
            or is_whole_placeholder(password)
        ):
            continue
        span = SecretSpan(*match.span("password"), "credentials in URL")
        spans.append(_Replacement(span, SECRET_MARKER))
    return spans


def _escape_start(text: str, index: int) -> int:
    """The start of the backslash escape (`\\"`, `\\\\`, `\\n`, `\\u00e9`) that `index` falls
    strictly inside, else `index`: where a replacement may start or end without leaving half
    an escape, so JSON stays valid. (A run of more than `_MAX_BACKSLASH_RUN` backslashes is
    read as if it started there.)"""
    at = text.rfind("\\", max(0, index - 5), index)
    if at < 0:
        return index
    run = at
    while run > 0 and at - run < _MAX_BACKSLASH_RUN and text[run - 1] == "\\":
        run -= 1
    if (at - run) % 2:
        return index  # the second of a `\\\\` pair, which ends at or before `index`
    length = 6 if _UNICODE_ESCAPE.match(text, at) else 2
    return at if index < at + length else index


def _string_end(text: str, start: int, stop: int) -> int:
    """`stop`, or the first `"` in `text[start:stop]` that ends a JSON string (not escaped,
    and followed by `,`, `}`, `]`, `:` or the end of the text): a value read up to the next
    space (`.netrc`'s `password <value>`) never takes the closing quote of the string it is
    in."""
    quote = text.find('"', start, stop)
    while quote >= 0:
        if _JSON_STRING_END.match(text, quote + 1) and _escape_start(text, quote) == quote:
            return quote
        quote = text.find('"', quote + 1, stop)
    return stop


class _StringTracker:
    """Whether an offset of a text lies inside a JSON string: unescaped `"` counted from the
    start of its line (JSON strings never span lines), read once, forwards (`inside` is asked
    for ascending offsets)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.position = 0
        self.inside_string = False

    def inside(self, index: int) -> bool:
        for token in _STRING_TOKENS.finditer(self.text, self.position):
            if token.start() >= index:
                break
            if token.group() == '"':
                self.inside_string = not self.inside_string
            elif token.group() in "\r\n":
                self.inside_string = False
            self.position = token.end()
        self.position = max(self.position, index)
        return self.inside_string


_STRING_TOKENS = re.compile(r'\\.|"|\r|\n', re.DOTALL)


def _between_strings(text: str, start: int, stop: int, strings: _StringTracker) -> bool:
    """Whether `text[start:stop]` starts right after a JSON string's closing quote, outside
    any string, with the structure that follows one (`, `, `: `, `]`, `}`)."""
    return (
        start > 0
        and text[start - 1] == '"'
        and _JSON_AFTER_STRING.match(text, start, stop) is not None
        and not strings.inside(start)
    )


_JSON_STRUCTURE_CHARS = " \t\r\n,:[]{}"
_JSON_STRUCTURE = re.compile(r"[ \t\r\n,:\[\]{}]*")
_JSON_AFTER_STRING = re.compile(r"[ \t\r\n]*[,:\]}]")
_JSON_STRING_END = re.compile(r"\s*(?:[,}\]:]|\Z)")
_MAX_BACKSLASH_RUN = 1024
_UNICODE_ESCAPE = re.compile(r"\\u[0-9A-Fa-f]{4}")


def _replace(text: str, spans: list[_Replacement], counts: Counter[str]) -> str:
    """`text` with each span (sorted, non-overlapping) replaced by its replacement; each
    counted in `counts` under its kind unless marked not to be. A span's ends are moved off
    the middle of a backslash escape (its start back to the escape, its end before it), and
    an uncounted piece right after another replacement adds no second marker."""
    if not spans:
        return text
    pieces = []
    end = 0
    replaced_end = -1
    strings = _StringTracker(text)
    for span, replacement, counted, _value in spans:
        start = max(end, _escape_start(text, span.start))
        stop = _string_end(text, start, _escape_start(text, span.end))
        if _between_strings(text, start, stop, strings):
            # `["password=", 0, "x"]`: a quoted value read across JSON strings; the
            # values between them become one string: `["password=", "[...]", "x"]`.
            start = _JSON_STRUCTURE.match(text, start, stop).end()  # type: ignore[union-attr]
            while stop > start and text[stop - 1] in _JSON_STRUCTURE_CHARS:
                stop -= 1
            replacement = f'"{replacement}"'
        if stop <= start:
            continue
        pieces.append(text[end:start])
        if counted or start != replaced_end:
            pieces.append(replacement)
        if counted:
            counts[span.kind] += 1
        end = replaced_end = stop
    pieces.append(text[end:])
    return "".join(pieces)
