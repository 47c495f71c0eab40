"""The secret detector shared by the project index filters and secret redaction.

One module: the secret patterns are one table with one set of acceptance rules (placeholders,
value shapes, names), read two ways: `secret_reason` (whether a text holds a secret: the
project index leaves such a file out, docs/project-knowledge.md) and `secret_spans` (where
the secret values are: `privacy.redaction` replaces them before text leaves for a remote
model, docs/privacy.md). Splitting the tables from their checks would let the two readings
disagree; most of the length is the pattern tables.

Rules from docs/reference.md §3.9 ("Secret content"), widened to the key formats of today's
providers, credential file formats and passwords in comments, connection strings and prose
(the list is in `secret_reason`). Every pattern starts with a literal anchor and is only
tried where one occurs, so both readings run in time linear in the text's length.

Reasons and kinds are short, stable strings meant for logs, manifests and status reports.
They never contain the secret that triggered them.
"""

from __future__ import annotations

import bisect
import heapq
import re
from collections.abc import Iterable, Iterator
from typing import NamedTuple


class SecretSpan(NamedTuple):
    """Where one secret value is: `text[start:end]` (offsets in characters), and its `kind`
    (the reason `secret_reason` gives for it, e.g. `GitHub token`, `credentials in URL`,
    `secret assignment (password)`)."""

    start: int
    end: int
    kind: str


# Secret detection is the costliest check on a large project, so no pattern scans the text.
# Every match of these patterns starts with a literal anchor; `bytes.find` locates anchors (in
# C, at memory speed) in a one-byte-per-character copy of the text (`AnchorText`), and a
# pattern is only tried, anchored, where one occurs (`anchored_matches`). The results are
# exactly those of `pattern.search` / `pattern.finditer` over the whole text.
_PRIVATE_KEY = re.compile(r"-----(?:BEGIN|END) (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")
_PRIVATE_KEY_ANCHORS = (b"-----BEGIN ", b"-----END ")  # an END line alone: a key cut above it


class _TokenShape(NamedTuple):
    """A provider's key format: `pattern` matches a whole key, starts where one of `anchors`
    occurs (`anchored_matches`; in the case-folded copy of the text when `folded`) and names
    the random part `body`.

    The key itself (`_key_span`, what redaction replaces) is the match, moved by `key_offset`
    characters at its start (a lookbehind that holds the key's first characters: `-1` for
    Stripe's `s` of `sk_live_`; `+1` to leave out the `:` before a password hash), or the
    group `key_group` when the match holds a field name (`AccountKey=`, a webhook's host)."""

    pattern: re.Pattern[str]
    anchors: tuple[bytes, ...]
    kind: str
    folded: bool = False
    key_offset: int = 0
    key_group: str | None = None


def _token(
    pattern: str,
    anchors: tuple[bytes, ...],
    kind: str,
    *,
    folded: bool = False,
    key_offset: int = 0,
    key_group: str | None = None,
) -> _TokenShape:
    return _TokenShape(re.compile(pattern), anchors, kind, folded, key_offset, key_group)


# Key formats of the providers, from their documentation (prefixes and lengths) and the rules
# of public secret scanners (GitHub secret scanning, GitLab's secret detection). Each is
# anchored on its literal prefix (on `gh` and `gl` for the GitHub and GitLab families: one
# scan of the text instead of one per prefix); a `body` that is a placeholder (`xxxx`,
# `your_`, one repeated character) or a single kind of character does not count
# (`_is_token`).
_TOKENS: tuple[_TokenShape, ...] = (
    _token(r"\b(?:AKIA|ASIA)(?P<body>[A-Z0-9]{16})\b", (b"AKIA", b"ASIA"), "AWS access key id"),
    # GitHub: personal (ghp_), OAuth (gho_), user-to-server (ghu_), server-to-server (ghs_),
    # refresh (ghr_) tokens and fine-grained personal tokens (github_pat_).
    _token(r"\bgh[pousr]_(?P<body>[A-Za-z0-9]{20,})", (b"gh",), "GitHub token"),
    _token(r"\bgithub_pat_(?P<body>[A-Za-z0-9_]{20,})", (b"github_pat_",), "GitHub token"),
    # GitLab: personal, deploy, runner, CI job, pipeline trigger, feed, incoming mail, OAuth
    # application, SCIM, agent, feature-flag client tokens; runner registration tokens.
    _token(
        r"\b(?:gl(?:pat|dt|rt|cbt|ptt|ft|imt|oas|soat|agent|ffct)-|GR1348941)"
        r"(?P<body>[A-Za-z0-9_\-]{20,})",
        (b"gl", b"GR1348941"),
        "GitLab token",
    ),  # fmt: skip
    # Slack: bot, user, app-level, workspace, refresh and configuration tokens; webhooks.
    _token(
        r"\bxox(?:[abposr]|e(?:\.xox[bp])?)-(?P<body>[A-Za-z0-9\-]{10,})", (b"xox",), "Slack token"
    ),
    _token(r"\bxapp-[0-9]-(?P<body>[A-Za-z0-9\-]{20,})", (b"xapp-",), "Slack token"),
    _token(
        r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<body>[A-Za-z0-9_/\-]{20,})",
        (b"hooks.slack.com/",),
        "Slack webhook",
        key_group="body",
    ),
    _token(  # sk_live_, sk_test_, rk_live_, rk_test_, pk_live_ (anchored after the first letter)
        r"(?:(?<=\b[sr])k_(?:live|test)|(?<=\bp)k_live)_(?P<body>[A-Za-z0-9]{16,})",
        (b"k_live_", b"k_test_"),
        "Stripe key",
        key_offset=-1,
    ),
    _token(r"\bwhsec_(?P<body>[A-Za-z0-9+/=]{24,})", (b"whsec_",), "Stripe key"),
    _token(r"\bAIza(?P<body>[0-9A-Za-z_\-]{35})(?![0-9A-Za-z_\-])", (b"AIza",), "Google API key"),
    _token(r"\bGOCSPX-(?P<body>[A-Za-z0-9_\-]{24,})", (b"GOCSPX-",), "Google OAuth secret"),
    _token(r"\bya29\.(?P<body>[A-Za-z0-9_\-]{30,})", (b"ya29.",), "Google OAuth token"),
    # OpenAI: project, service account and admin keys, and the older `sk-` + 48 (`sk-` + 32 or
    # more letters and digits is also the shape of OpenAI-compatible providers' keys).
    _token(
        r"\bsk-(?:proj|svcacct|admin|None)-(?P<body>[A-Za-z0-9_\-]{40,})", (b"sk-",), "OpenAI key"
    ),
    _token(r"\bsk-(?P<body>[A-Za-z0-9]{32,})(?![A-Za-z0-9_\-])", (b"sk-",), "OpenAI key"),
    # Anthropic: API (`sk-ant-api03-`), admin (`sk-ant-admin01-`) and OAuth keys.
    _token(
        r"\bsk-ant-(?:api|admin|oat|sid)[0-9]{2}-(?P<body>[A-Za-z0-9_\-]{32,})",
        (b"sk-",),
        "Anthropic key",
    ),
    # OpenRouter (`sk-or-v1-` + 64 hex).
    _token(r"\bsk-or-v1-(?P<body>[0-9a-f]{64})(?![A-Za-z0-9_])", (b"sk-",), "OpenRouter key"),
    # Groq (`gsk_` + 52), xAI (`xai-` + 80), Perplexity (`pplx-` + 48), Replicate (`r8_` + 37).
    _token(r"\bgsk_(?P<body>[A-Za-z0-9]{52})(?![A-Za-z0-9_])", (b"gsk_",), "Groq key"),
    _token(r"\bxai-(?P<body>[A-Za-z0-9]{80})(?![A-Za-z0-9_])", (b"xai-",), "xAI key"),
    _token(r"\bpplx-(?P<body>[A-Za-z0-9]{48})(?![A-Za-z0-9_])", (b"pplx-",), "Perplexity key"),
    _token(r"\br8_(?P<body>[A-Za-z0-9]{37})(?![A-Za-z0-9_])", (b"r8_",), "Replicate token"),
    # SendGrid (`SG.` + 22 + `.` + 43), DigitalOcean personal, OAuth and refresh tokens
    # (`dop_v1_`, `doo_v1_`, `dor_v1_` + 64 hex), Shopify app tokens (`shpat_`, `shpca_`,
    # `shppa_`, `shpss_` + 32 hex).
    _token(
        r"\bSG\.(?P<body>[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43})(?![A-Za-z0-9_\-])",
        (b"SG.",),
        "SendGrid key",
    ),
    _token(  # anchored after `dop`, `doo`, `dor` (one scan of the text instead of three)
        r"(?<=\bdo[opr])_v1_(?P<body>[0-9a-f]{64})(?![A-Za-z0-9_])",
        (b"_v1_",),
        "DigitalOcean token",
        key_offset=-3,
    ),
    _token(r"\bshp(?:at|ca|pa|ss)_(?P<body>[0-9a-fA-F]{32})\b", (b"shp",), "Shopify token"),
    _token(r"\bnpm_(?P<body>[A-Za-z0-9]{36})(?![A-Za-z0-9_])", (b"npm_",), "npm token"),
    # PyPI API tokens are macaroons whose first bytes name the index (pypi.org, test.pypi.org).
    _token(
        r"\bpypi-(?P<body>AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw)[A-Za-z0-9_\-]{50,})",
        (b"pypi-AgE",),
        "PyPI token",
    ),
    _token(r"\bhf_(?P<body>[A-Za-z0-9]{30,})(?![A-Za-z0-9_])", (b"hf_",), "Hugging Face token"),
    # Azure: storage account and Service Bus / Event Hubs keys in connection strings
    # (the `AccountKey` and `SharedAccessKey` fields, anchored on their names in the case-folded
    # text), the signature of a shared access signature (SAS) URL, and Entra ID client secrets
    # (three characters, a digit, `Q~`).
    # Connection strings are case-insensitive and allow spaces around `=`.
    _token(
        r"(?<![A-Za-z])(?i:(?:account|sharedaccess)key)[ \t]*=[ \t]*"
        r"(?P<body>[A-Za-z0-9+/]{30,}={0,2})",
        (b"accountkey", b"sharedaccesskey"),
        "Azure key",
        folded=True,
        key_group="body",
    ),
    _token(
        r"(?<=[?&;])sig=(?P<body>[A-Za-z0-9%+/]{30,}(?:=|%3[Dd]){0,2})",
        (b"sig=",),
        "Azure SAS signature",
        key_group="body",
    ),
    _token(
        r"(?<=[A-Za-z0-9_~.\-]{3}[0-9])Q~(?P<body>[A-Za-z0-9_~.\-]{31,34})(?![A-Za-z0-9_~.\-])",
        (b"Q~",),
        "Azure client secret",
        key_offset=-4,
    ),
    # Apache htpasswd and LDAP `userPassword` SHA-1 hashes: `user:{SHA}` + base64 of 20 bytes,
    # salted `{SSHA}`, and the SHA-2 variants of OpenLDAP (`{SSHA512}`).
    _token(
        r"(?:(?<=:)|(?<=:[ \t]))\{S?SHA(?:256|384|512)?\}(?P<body>[A-Za-z0-9+/]{27,}={0,2})",
        (b"{S",),
        "password hash",
    ),
    # A crypt(3) password hash after a user name: /etc/shadow, .htpasswd (MD5-crypt, bcrypt,
    # SHA-256/512-crypt, yescrypt, scrypt).
    _token(
        r"(?<=[A-Za-z0-9_.\-]):\$(?:1|2[abxy]|5|6|7|y|gy|apr1)\$(?P<body>[./A-Za-z0-9$,=]{20,})",
        (b":$",),
        "password hash",
        key_offset=1,
    ),
)
# Publicly documented keys that unlock nothing: the Azure Storage emulator (Azurite) key.
_PUBLIC_KEYS = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==",
)
# `Bearer <token>` (an `Authorization` header in code, config or a curl line): 20 or more
# token characters, of at least two kinds (so that prose such as "Bearer authentication" is not
# a token). Anchored on `bearer` in the case-folded copy.
_BEARER = re.compile(r"(?i)bearer[ \t]+(?P<value>[A-Za-z0-9\-._~+/]{20,}=*)(?![\w\-.~+/=])")
_BEARER_ANCHORS = (b"bearer",)
# `scheme://user:password@host`, anchored on `://`.
URL_CREDENTIALS = re.compile(
    r"://(?P<user>[^\s:/?#@\"'`<>,]*):(?P<password>[^\s:/?#@\"'`<>,]+)@"
    r"(?P<host>[A-Za-z0-9\[][^\s/?#\"'`<>]*)"
)
URL_ANCHORS = (b"://",)
# A `.netrc` entry (curl, git, ftp, Python's `netrc`): `machine <host>`, then tokens such as
# `login <user>`, then `password <value>`; on one line or several. Anchored on `machine`.
_NETRC_ENTRY = re.compile(
    r"(?<![A-Za-z0-9_\-])(?:machine[ \t]+\S+|default)"
    r"(?:\s+(?:login|account|port|user)[ \t]+\S+){0,6}"  # bounded: `default` takes no value
    r"\s+(?:password|passwd)[ \t]+(?P<value>\S+)"
)
_NETRC_ANCHORS = (b"machine", b"default")
# A PostgreSQL password file line (`.pgpass`, `pgpass.conf`): `host:port:database:user:password`,
# the port a number or `*`, `:` and `\` escaped with `\`. Candidate lines are found by their
# `:<port>:` (`_PGPASS_PORT`, a search with a literal first character over the one-byte copy of
# the text), then matched whole from the line start.
_PGPASS_PORT = re.compile(rb":(?:[0-9]{1,5}|\*):")
_PGPASS_LINE = re.compile(
    r"[ \t]*[A-Za-z0-9_.\-*\[\]%]+:(?:[0-9]{1,5}|\*):(?:\\.|[^:\s\\])+:"
    r"(?P<user>(?:\\.|[^:\s\\])+):(?P<password>(?:\\.|[^:\s\\])+)[ \t]*(?=[\r\n]|\Z)"
)
TRIVIAL_URL_PASSWORDS = frozenset(
    {
        "pass", "password", "passwd", "pwd", "pw", "secret", "test", "testing", "example",
        "changeme", "admin", "root", "guest", "user", "username", "foo", "bar", "baz", "xxx",
        "mypassword", "mysecret", "token", "hunter2", "s3cret", "secret123", "password123",
    }
)  # fmt: skip

# `name = value` for a secret-like name. The name contains one of the keywords below (as a
# word part: `SECRET_KEY`, `AWS_SECRET_ACCESS_KEY`, `githubToken`, `db.password`, `authKey`),
# then comes an optional closing quote or bracket (`"password":`, `['token']`), an optional type
# annotation and an assignment operator, then either
# - a quoted value (`"..."`, `'...'`, `` `...` ``) of 8 or more characters on one line, or
# - an unquoted value that runs to the end of the line (config files: YAML, `.env`, shell,
#   `.ini`, `.properties`), 8 or more characters without spaces or code punctuation.
# Only the part from the keyword on is matched (anchored where the keyword occurs); the rest
# of the name is looked at by `_assignment_reason`.
_SECRET_ASSIGNMENT = re.compile(
    r"""(?ix)
    (?P<name>api[_\-]?key|auth|passw(?:or)?d|pwd|private[_\-]?key|secret|token|access[_\-]?key
      |pass)
    (?P<rest>[a-z0-9_.\-]{0,64}+)
    (?:["']\]?|\])?
    (?:
      (?:[ \t]{0,8}:[ \t]{0,8}[A-Za-z_][\w.\[\]| ]{0,64}?)?
      \s*(?::=|=>|[:=])\s*
      (?P<quote>["'`])
      (?P<value>[^"'`\r\n]{8,})
      (?P=quote)
    |
      (?P<bare_sep>[ \t]*[:=][ \t]*)
      (?P<bare>[^\s"'`(){}\[\]<>,;$\\=:|&*!\#%@][^\s"'`(){}\[\]<>,;$\\]{7,})
      (?P<line_end>[ \t]*(?:\#[^\r\n]*)?(?=[\r\n]|\Z))?
      (?(line_end)|(?=[ \t;,]))
    )
    """
)
# A password written where the assignment rule does not look: in a comment
# (`# password: <value>`, `/* pwd = <value> */`, `<!-- the password is <value> -->`; any text
# may follow) or in a connection string (`Server=db;User ID=app;Password=...;`: `=` without
# spaces, a `;` before the name or after the value). Matched where the keyword occurs (anchors
# `_LOOSE_PASSWORD_ANCHORS`); `_loose_password_reason` then checks the context and the value.
#
# In a comment the keyword may also be the short `pass` or `pw` (`# pass: <value>`,
# `# pw=<value>`), and up to three words may stand between it and a `:` or `=` (`# admin
# password for prod: <value>`). Outside a comment, prose counts when the value is quoted:
# "the staging password is `<value>`" (`password in text`).
_LOOSE_PASSWORD = re.compile(
    r"""(?ix)
    (?P<keyword>passw(?:or)?d|pwd|passphrase|pass|pw)s?
    (?P<words>(?:[ \t]+[a-z0-9_.\-]+){0,3}?)
    (?P<sep>[ \t]*[:=][ \t]*|[ \t]+is[ \t]+)
    (?P<quote>["'`]?)
    (?P<value>[^\s"'`]{6,})
    """
)
_LOOSE_PASSWORD_ANCHORS = (b"pass", b"pw")
# Before the keyword on its line: a comment opener (`#`, `//`, `/*`, `<!--`; `--`, `;`, `%`
# and `REM` followed by a space, so that a `--password=...` option is not a comment) at the
# start or after a space, or a line that starts with `*` (a block comment).
_COMMENT_OPENER = re.compile(r"(?:^|\s)(?:\#|//|/\*|<!--|(?:--|;|%|REM)\s)|^\s*\*")
# What may follow a password in a comment without being part of it.
_COMMENT_CLOSERS = ("*/", "-->")
_VALUE_TRAILERS = ".,;:)]}"
# Every keyword above starts with one of these, looked for in the case-folded copy of the text.
_SECRET_NAME_ANCHORS = (
    b"access",
    b"api",
    b"auth",
    b"pass",
    b"private",
    b"pw",
    b"secret",
    b"token",
)
# Lower-case letters that may directly continue a keyword within the same word part.
_KEYWORD_CONTINUATIONS = {"auth": ("orization",), "secret": ("key",)}
# Names ending like this take any quoted value of 12 or more characters (spaces included).
_STRONG_ENDINGS = (
    "password", "passwd", "secret", "token", "api_key", "apikey", "private_key", "privatekey",
    "access_key", "accesskey", "secret_key", "secretkey", "authorization",
)  # fmt: skip
# Other names holding a keyword must end with one of these word parts (`SECRET_ACCESS_KEY`,
# `authKey`, `AUTH_TOKEN`); their values must be `_secret_shaped`.
_SECRET_LAST_PARTS = frozenset(
    {"key", "token", "secret", "password", "passwd", "pwd", "pass", "passphrase", "auth",
     "credential", "credentials", "cred", "creds"}
)  # fmt: skip
# A name whose last word part is one of these names something about a secret, not a secret.
_NON_SECRET_SUFFIXES = frozenset(
    {
        "url", "uri", "urls", "path", "file", "filename", "dir", "type", "types", "name",
        "names", "field", "fields", "header", "prefix", "suffix", "length", "len", "env",
        "var", "endpoint", "help", "label", "message", "msg", "prompt", "pattern", "regex",
        "re", "format", "fmt", "mode", "method", "methods", "scheme", "class", "kind", "text",
        "hint", "template", "placeholder", "error", "errors", "count", "limit", "size",
        "timeout", "expiry", "expires", "expiration", "ttl", "enabled", "required", "policy",
        "strategy", "provider", "backend", "store", "cache", "hash", "hasher", "hashers",
        "version", "command", "cmd", "flag", "option", "options", "source", "location",
        "id", "host", "port", "user", "username", "login", "display", "title", "desc",
        "description", "doc", "docs", "form", "input", "widget", "view", "handler", "manager",
        "validator", "validators", "reset", "changed", "change", "min", "max",
    }
)  # fmt: skip
_NAME_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_IDENTIFIER_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
# Unquoted values that are code or configuration references, not secrets.
BARE_REFERENCE = re.compile(
    r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+\Z"  # a.b.c attribute access
    r"|(?:/|~/|\./|\.\./)"  # a path
    r"|.*://"  # a URL (credentials in it are checked separately)
    r"|arn:"  # an Amazon resource name
)
_CASE_FOLD_TABLE = {ord(char): letter for char, letter in (
    ("\u0130", "i"), ("\u0131", "i"), ("\u017f", "s"), ("\u212a", "k"))}  # fmt: skip
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
NAME_WORDS = ("pass", "pwd", "token", "secret", "key", "auth", "cred")
BARE_WORDS = frozenset(
    {"none", "null", "nil", "true", "false", "undefined", "required", "optional", "string",
     "secret", "password", "notset", "unset", "empty", "disabled", "enabled"}
)  # fmt: skip
# The only non-ASCII characters that a case-insensitive pattern matches to an ASCII letter,
# with that letter (`(?i)[a-z]` over all of Unicode; a test keeps the list complete).
_CASE_FOLD_FIXES = (
    ("\u0130", ord("i")),
    ("\u0131", ord("i")),
    ("\u017f", ord("s")),
    ("\u212a", ord("k")),
)
PLACEHOLDER_WORDS = (
    "example",
    "placeholder",
    "redacted",
    "dummy",
    "changeme",
    "change_me",
    "change-me",
    "change_this",
    "changethis",
    "replace",
    "your",
    "insert_",
    "fill_in",
    "fillme",
    "todo",
    "fixme",
    "process.env",
    "${",
    "$(",
    "{{",
    "xxxx",
    "****",
)
ELLIPSES = ("...", "\u2026")
# `<value>`, and template references: `{name}` (format strings), `%(name)s`, a bare `$NAME`.
TEMPLATE_PLACEHOLDER = re.compile(
    r"%[-#0 +]*[0-9]*(?:\.[0-9]+)?[sdifxr]|<[^<>]*>|\{[A-Za-z_][\w.\[\]]*\}|%\([A-Za-z_]\w*\)s|^\$[A-Za-z_]\w*$"
)


def secret_reason(text: str) -> str | None:
    """Return why `text` looks like it holds a secret, or None.

    Signals (docs/reference.md §3.9), checked in this order:

    - a PEM private key header or footer (`private key`; a footer alone: a key cut above it);
    - the key formats of the major providers, by prefix (the kind is the provider's):
      AWS access key ids (`AKIA`/`ASIA` + 16); GitHub (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`,
      `github_pat_`); GitLab (`glpat-`, `gldt-`, `glrt-`, `glcbt-`, `glptt-`, `glft-`,
      `glimt-`, `gloas-`, `glsoat-`, `glagent-`, `glffct-`, `GR1348941`); Slack (`xoxb-`,
      `xoxp-`, `xoxa-`, `xoxr-`, `xoxs-`, `xoxo-`, `xoxe-`, `xapp-`, `hooks.slack.com/services/`
      webhooks); Stripe (`sk_live_`, `sk_test_`, `rk_live_`, `rk_test_`, `pk_live_`,
      `whsec_`); Google (`AIza` + 35, `GOCSPX-`, `ya29.`); OpenAI (`sk-proj-`, `sk-svcacct-`,
      `sk-admin-`, `sk-` + 32 or more letters and digits); Anthropic (`sk-ant-api03-`,
      `sk-ant-admin01-`, `sk-ant-oat01-`); OpenRouter (`sk-or-v1-` + 64 hex); Groq (`gsk_` +
      52); xAI (`xai-` + 80); Perplexity (`pplx-` + 48); Replicate (`r8_` + 37); SendGrid
      (`SG.` + 22 + `.` + 43); DigitalOcean (`dop_v1_`, `doo_v1_`, `dor_v1_` + 64 hex);
      Shopify (`shpat_`, `shpca_`, `shppa_`, `shpss_` + 32 hex); npm (`npm_` + 36); PyPI
      (`pypi-AgEIcHlwaS5vcmc`, a macaroon); Hugging Face (`hf_` + 30 or more); Azure
      (`AccountKey` and `SharedAccessKey` in connection strings, any case, spaces allowed
      around `=`; a SAS URL's `sig=`; Entra ID client secrets `xxxNQ~...`); password hashes
      after a user name: crypt(3) (`user:$6$...`, `$apr1$`, bcrypt `$2y$`; `shadow`,
      `.htpasswd`) and `{SHA}`, `{SSHA}` (htpasswd, LDAP `userPassword`). A match does not count when it contains `EXAMPLE`, or its random part is
      a placeholder (`xxxx`, `your_`, one repeated character), of one kind of character, or
      CamelCase words (`_is_token`);
    - credential file formats, whatever the file's name: a `.netrc` entry `machine <host> ...
      password <value>` (or `default ... password <value>`) (`netrc credentials`) and a PostgreSQL password file line
      `host:port:database:user:password` (`pgpass credentials`), unless the password is
      not password-shaped, a well-known default or the user name again;
    - `Bearer <token>` with 20 or more token characters of at least two kinds (`bearer token`);
    - credentials in a URL, `scheme://user:password@host`, unless the password is a
      placeholder (`password`, `pass`, `${VAR}`, `<password>`, `***`, the user name again, ...)
      or the host is an example host (`credentials in URL`);
    - an assignment (`=`, `:`, `:=`, `=>`) to a name containing `secret`, `password`,
      `passwd`, `pwd`, `pass`, `token`, `api_key`/`apikey`, `access_key`, `private_key`,
      `client_secret` or `auth` as a word part (`SECRET_KEY`, `AWS_SECRET_ACCESS_KEY`,
      `githubToken`, `db.password`, `authKey`; not `tokens`, `tokenizer`, `author`, `oauth`,
      `bypass`, `passport`, nor names ending in a part such as `_url`, `_path`, `_type`, `_name`, `_hash`) of
      - a quoted value of 12 or more characters when the name ends with a keyword (`password`,
        `DB_PASSWORD`, `api_key`, `secret_key`), or
      - a quoted value, an unquoted value running to the end of the line (YAML, `.env`,
        shell `export`, `.ini`, `.properties`), or an environment assignment before a command
        (`PGPASSWORD=<value> psql`: a name in capitals, `=` without spaces), that is
        secret-shaped: 8 or more characters
        without spaces, with a letter and a digit or symbol, not a reference (`${X}`, `$X`,
        `os.environ[...]`, `get_password()`, `settings.password`, a path, a URL) and not a
        word such as `None`, `null` or `true`; never a "value" whose opening quote closes
        the string the name is in (`"password="}], ["x"` is two JSON strings);
    - a password in a comment (`# password: <value>`, `/* pwd = <value> */`, `# pw=<value>`,
      `# admin password for prod: <value>` (up to three words before `:` or `=`), `<!-- the
      password is <value> -->`; `password in comment`), in prose with the value quoted ("the
      staging password is `<value>`"; `password in text`) or in a connection string
      (`...;Password=<value>;`; `credentials in connection string`): 6 or more characters
      with a letter and a digit or symbol, not a placeholder, reference, variable name or
      glob (`*...`).

    Values that look like placeholders never count, by one rule for every signal
    (`is_placeholder`): `example`, `placeholder`, `redacted`, `dummy`, `changeme`, `replace`,
    `your`, `xxx`, `process.env`, `${VAR}`, `$VAR`, `{{var}}`, `{name}`, `%(name)s`, `<value>`,
    a value ending in `...` or `…` (`sk-ant-api03-...`), a value of one or two distinct
    characters, ...

    Every pattern starts with a literal anchor and is only tried where one occurs, so the
    check runs at close to memory speed; the assignment and password rules read the first
    `HEURISTIC_LINE_CHARS` characters of each line (all the index keeps of a longer one). The reason names the kind of secret (e.g.
    `secret assignment (password)`), never the value. `secret_spans` finds the same secrets,
    all of them, with where they are: it is empty exactly when this is None.
    """
    anchor_text = AnchorText(text)
    for _marker in _private_key_markers(text, anchor_text):
        return "private key"
    for shape, _match in _token_matches(text, anchor_text):
        return shape.kind
    for _match in _url_credentials(text, anchor_text):
        return "credentials in URL"
    for _match in _netrc_entries(text, anchor_text):
        return "netrc credentials"
    for _match in _pgpass_entries(text, anchor_text):
        return "pgpass credentials"
    for _match in bearer_tokens(text, anchor_text):
        return "bearer token"
    lines = text.split("\n") if "\r" not in text else _LINE_BREAK.split(text)
    if max(map(len, lines)) > HEURISTIC_LINE_CHARS:  # `split` gives at least one line
        text = "\n".join(line[:HEURISTIC_LINE_CHARS] for line in lines)
        anchor_text = AnchorText(text)
    for reason, _start, _end in _assignments(text, anchor_text):
        return reason
    for reason, _start, _end in _loose_passwords(text, anchor_text):
        return reason
    return None


HEURISTIC_LINE_CHARS = 5000
"""Assignments and passwords in comments are looked for in the first this many characters of
each line (lines end at `\n`, `\r\n` or `\r`): exactly what the index keeps of an overlong
line (`windows.cut_line`; `project.filters.MAX_LINE_CHARS` is this constant); provider key formats are found anywhere. The bound keeps the check
linear in the file's size: those rules look at the line around each keyword, so a line of n
characters full of keywords would cost n^2."""
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def secret_spans(text: str) -> list[SecretSpan]:
    """Every secret value `secret_reason` recognises in `text`: sorted, non-overlapping spans.

    By the same rules, so `secret_spans(text) == []` exactly when `secret_reason(text)` is
    None (placeholders never count). What a span covers, per signal:

    - a PEM private key: the block from its `BEGIN` line through the first `END` line after
      it (to the end of the text when there is none); an `END` line alone: that line;
    - a provider key format: the whole key (`sk-proj-...`, `ghp_...`, `AKIA...`); in an Azure
      connection string or SAS URL the key after `AccountKey=` / `sig=`, of a Slack webhook
      its path, of a password hash line the hash;
    - `Bearer <token>`: the token; `scheme://user:password@host`: the password; a `.netrc`
      entry: the value after `password`; a `.pgpass` line: its last field;
    - an assignment: the value (inside its quotes when quoted);
    - a password in a comment, in prose or in a connection string: the password.

    Spans of different signals that overlap (a key in an assignment's value) are merged into
    one, of the kind of the one starting first (the longer when both start together).
    Offsets are into `text` itself; the assignment and password rules read the first
    `HEURISTIC_LINE_CHARS` characters of each line, as `secret_reason` does, and a value that
    reaches that cut runs on to the next space or quote of the line. Linear in the length of
    `text`; never raises on any `str` (lone surrogates, NUL characters included).
    """
    anchor_text = AnchorText(text)
    spans = [*private_key_blocks(text, anchor_text), *key_spans(text, anchor_text)]
    for match in _url_credentials(text, anchor_text):
        spans.append(SecretSpan(*match.span("password"), "credentials in URL"))
    for match in _netrc_entries(text, anchor_text):
        spans.append(SecretSpan(*match.span("value"), "netrc credentials"))
    for match in _pgpass_entries(text, anchor_text):
        spans.append(SecretSpan(*match.span("password"), "pgpass credentials"))
    for match in bearer_tokens(text, anchor_text):
        spans.append(SecretSpan(*match.span("value"), "bearer token"))
    spans.extend(_heuristic_spans(text, anchor_text))
    return merged_spans(spans)


def may_hold_secret(text: str) -> bool:
    """False when no anchor of any pattern occurs in `text`: then `secret_reason(text)` is
    None and `secret_spans(text)` is empty, and the check can stop there. (True says only
    that a pattern must be tried.) Linear: one `bytes.find` per anchor."""
    anchor_text = AnchorText(text)
    exact = anchor_text.exact
    if any(anchor in exact for anchor in _EXACT_ANCHORS) or _PGPASS_PORT.search(exact):
        return True
    folded = anchor_text.folded()
    return any(anchor in folded for anchor in _FOLDED_ANCHORS)


def _heuristic_spans(text: str, anchor_text: AnchorText) -> Iterator[SecretSpan]:
    """The assignment and password spans of `text`, read (as `secret_reason` reads them) in
    the first `HEURISTIC_LINE_CHARS` characters of each line, as offsets into `text`."""
    lines = _LINE_BREAK.split(text)
    if not any(len(line) > HEURISTIC_LINE_CHARS for line in lines):
        for kind, start, end in _assignments(text, anchor_text):
            yield SecretSpan(start, end, kind)
        for kind, start, end in _loose_passwords(text, anchor_text):
            yield SecretSpan(start, end, kind)
        return
    cut = "\n".join(line[:HEURISTIC_LINE_CHARS] for line in lines)
    cut_anchor_text = AnchorText(cut)
    cut_starts: list[int] = []
    offset = 0
    for line in lines:
        cut_starts.append(offset)
        offset += min(len(line), HEURISTIC_LINE_CHARS) + 1
    starts = [0, *(match.end() for match in _LINE_BREAK.finditer(text))]
    found = [
        *_assignments(cut, cut_anchor_text),
        *_loose_passwords(cut, cut_anchor_text),
    ]
    for kind, start, end in found:
        index = bisect.bisect_right(cut_starts, start) - 1
        column = start - cut_starts[index]
        width = end - start
        original = starts[index] + column
        if column + width == HEURISTIC_LINE_CHARS and len(lines[index]) > HEURISTIC_LINE_CHARS:
            rest = _VALUE_RUN.match(text, original + width)
            width = (rest.end() if rest else original + width) - original
        yield SecretSpan(original, original + width, kind)


_VALUE_RUN = re.compile(r"[^\s\"'`]*")
"""The rest of a value cut at `HEURISTIC_LINE_CHARS`: up to the next space or quote."""


def merged_spans(spans: list[SecretSpan]) -> list[SecretSpan]:
    """`spans` sorted, overlapping ones merged (the first's kind; the longer's on a tie)."""
    merged: list[SecretSpan] = []
    for span in sorted(spans, key=lambda span: (span.start, -span.end)):
        if merged and span.start < merged[-1].end:
            if span.end > merged[-1].end:
                merged[-1] = merged[-1]._replace(end=span.end)
            continue
        merged.append(span)
    return merged


def _private_key_markers(text: str, anchor_text: AnchorText) -> Iterator[re.Match[str]]:
    """Every PEM private key `BEGIN` or `END` line of `text`, in order."""
    return anchored_matches(_PRIVATE_KEY, text, anchor_text.starts(_PRIVATE_KEY_ANCHORS))


def private_key_blocks(text: str, anchor_text: AnchorText) -> Iterator[SecretSpan]:
    """Each PEM private key block: its `BEGIN` line through the first `END` line after it (to
    the end of `text` without one); an `END` line with no `BEGIN` open: that line."""
    begin = -1
    for marker in _private_key_markers(text, anchor_text):
        if marker.group(0).startswith("-----BEGIN"):
            if begin < 0:
                begin = marker.start()
        elif begin < 0:
            yield SecretSpan(marker.start(), marker.end(), "private key")
        else:
            yield SecretSpan(begin, marker.end(), "private key")
            begin = -1
    if begin >= 0:
        yield SecretSpan(begin, len(text), "private key")


def _token_matches(
    text: str, anchor_text: AnchorText
) -> Iterator[tuple[_TokenShape, re.Match[str]]]:
    """Every provider key of `text` (`_TOKENS`, `_is_token`), shape by shape."""
    for shape in _TOKENS:
        starts = anchor_text.starts(shape.anchors, folded=shape.folded)
        for match in anchored_matches(shape.pattern, text, starts):
            if _is_token(match):
                yield shape, match


def key_spans(text: str, anchor_text: AnchorText) -> Iterator[SecretSpan]:
    """The span of every provider key of `text` (`_token_matches`): the key itself, see
    `_TokenShape`."""
    for shape, match in _token_matches(text, anchor_text):
        if shape.key_group is not None:
            start, end = match.span(shape.key_group)
        else:
            start, end = match.start() + shape.key_offset, match.end()
        yield SecretSpan(start, end, shape.kind)


def _url_credentials(text: str, anchor_text: AnchorText) -> Iterator[re.Match[str]]:
    """Every `scheme://user:password@host` of `text` with a real password (`_is_url_secret`)."""
    for match in anchored_matches(URL_CREDENTIALS, text, anchor_text.starts(URL_ANCHORS)):
        if _is_url_secret(match):
            yield match


def _netrc_entries(text: str, anchor_text: AnchorText) -> Iterator[re.Match[str]]:
    """Every `.netrc` entry of `text` with a real password (`_is_file_password`)."""
    entries = anchored_matches(_NETRC_ENTRY, text, anchor_text.starts(_NETRC_ANCHORS))
    return (match for match in entries if _is_file_password(match.group("value")))


def bearer_tokens(text: str, anchor_text: AnchorText) -> Iterator[re.Match[str]]:
    """Every `Bearer <token>` of `text` whose token has two kinds of characters and is not a
    placeholder."""
    bearers = anchor_text.starts(_BEARER_ANCHORS, folded=True)
    for match in anchored_matches(_BEARER, text, bearers):
        value = match.group("value")
        if _character_kinds(value) >= 2 and not is_placeholder(value):
            yield match


def _is_token(match: re.Match[str]) -> bool:
    """A provider-format match is a key unless it is documentation: `EXAMPLE` in it, a
    placeholder body (`xxxx`, `your_`, `${...}`, one repeated character), a body of one kind of
    character (`sk-` + digits, `xoxb-not-a-real-token`), letters in CamelCase words rather
    than random case (`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`), or a published dummy key."""
    body = match.group("body")
    if "EXAMPLE" in match.group(0).upper() or body in _PUBLIC_KEYS:
        return False
    if is_placeholder(body, token=True):
        return False
    if body.isalpha():  # letters only (Hugging Face): random case, not CamelCase words
        upper = sum(char.isupper() for char in body)
        return 0.25 * len(body) <= upper <= 0.75 * len(body)
    return _character_kinds(body) >= 2


def _assignments(text: str, anchor_text: AnchorText) -> Iterator[tuple[str, int, int]]:
    """Every secret assignment (see `secret_reason`), in order: `(reason, start, end)`, the
    reason `secret assignment (<keyword>)` and `text[start:end]` the value (inside its quotes).

    Like `anchored_matches`, but an occurrence whose name is rejected (`tokens`, `author`)
    does not hide the keywords after it (`author_token`).
    """
    end = 0
    for start in anchor_text.starts(_SECRET_NAME_ANCHORS, folded=True):
        if start < end:
            continue
        match = _SECRET_ASSIGNMENT.match(text, start)
        if match is None:
            continue
        keyword = match.group("name").lower().replace("-", "_")
        rest = match.group("rest")
        strong = _name_strength(text, start, keyword, rest)
        if strong is None:
            continue
        end = match.end()
        value = match.group("value")
        if value is not None:
            if is_placeholder(value) or _closes_name_string(text, start, match):
                continue
            if not (strong and len(value) >= 12) and not _secret_shaped(value):
                continue
            value_start, value_end = match.span("value")
        else:
            bare = match.group("bare")
            if is_placeholder(bare) or not _secret_shaped(bare):
                continue
            if match.group("line_end") is None and not _environment_assignment(text, match):
                continue  # text follows the value: only `NAME=value command` counts
            if IDENTIFIER.match(bare) and any(word in bare.lower() for word in NAME_WORDS):
                continue  # another variable: `password = password2`, `token = auth_token_v2`
            value_start, value_end = match.span("bare")
        if keyword == "auth" and rest.lower().startswith("orization"):
            keyword = "authorization"
        elif keyword == "secret" and not rest:
            before = text[max(0, start - 7) : start].lower().replace("-", "_")
            if before.endswith(("client_", "client")):
                keyword = "client_secret"
        yield f"secret assignment ({keyword})", value_start, value_end


def _closes_name_string(text: str, start: int, match: re.Match[str]) -> bool:
    """Whether the quote before a quoted value closes the string the name is in: in
    `"password="}], [], ["x"`, the `"` after `=` ends the JSON string `"password="`, so what
    follows up to the next quote is the text between two strings, not a value."""
    name_start = start
    while name_start > 0 and (text[name_start - 1].isalnum() or text[name_start - 1] in "_.-"):
        name_start -= 1
    quote = match.group("quote")
    if name_start == 0 or text[name_start - 1] != quote:
        return False
    return quote not in text[match.end("rest") : match.start("quote")]


def _environment_assignment(text: str, match: re.Match[str]) -> bool:
    """Whether a bare value with more text after it on its line is a shell environment
    assignment before a command (`PGPASSWORD=<value> psql`, `-e POSTGRES_PASSWORD=<value>`):
    `=` with no space around it, after a name in capitals."""
    if match.group("bare_sep") != "=":
        return False
    start = match.start()
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
        start -= 1
    name = text[start : match.start("bare_sep")]
    return name.isupper()


def _loose_passwords(text: str, anchor_text: AnchorText) -> Iterator[tuple[str, int, int]]:
    """Every password in a comment (`password in comment`), in prose (`password in text`) or in
    a connection string (`credentials in connection string`), see `_LOOSE_PASSWORD`, in
    order: `(reason, start, end)`, `text[start:end]` the password.

    The value must look like a password: 6 or more characters, a letter and a digit or
    symbol, not a placeholder, reference, word such as `None`, or another variable's name
    (`password2`); in a connection string, not a well-known default (`password123`).
    """
    starts = anchor_text.starts(_LOOSE_PASSWORD_ANCHORS, folded=True)
    openers: dict[int, int] = {}  # line start -> end of its first comment opener (-1: none)
    for match in anchored_matches(_LOOSE_PASSWORD, text, starts):
        start = match.start()
        if start > 0 and text[start - 1].isalnum():
            continue  # `oldpassword`, `OLDPWD`
        raw = match.group("value")
        value_start = match.start("value")
        first_char = line_start(text, start)
        if first_char not in openers:  # one search per line, not one per keyword
            line_end = text.find("\n", start)
            opener = _COMMENT_OPENER.search(text[first_char : line_end if line_end >= 0 else None])
            openers[first_char] = opener.end() if opener else -1
        in_comment = 0 <= openers[first_char] <= start - first_char
        short = match.group("keyword").lower() in ("pass", "pw")
        words = match.group("words")
        is_sep = match.group("sep").strip().lower() == "is"
        if short and (words or is_sep):
            continue  # `pass` and `pw` only right before `:` or `=`
        if words and is_sep:
            continue  # "the password of the day is ...": extra words only before `:` or `=`
        quote = match.group("quote")
        if (
            is_sep
            and quote
            and text.startswith(quote, match.end("value"))
            and password_shaped(raw)
            and raw.lower() not in TRIVIAL_URL_PASSWORDS
        ):
            # "the staging password is `<value>`"
            yield "password in text", value_start, value_start + len(raw)
            continue
        if match.group("sep") == "=" and not words:  # `Password=...`, no spaces: not code
            value, semicolon, _ = raw.partition(";")
            if (
                (semicolon or text[first_char:start].rstrip(" \t").endswith(";"))
                and password_shaped(value)
                and value.lower() not in TRIVIAL_URL_PASSWORDS
            ):
                yield "credentials in connection string", value_start, value_start + len(value)
                continue
        if in_comment:
            value = _comment_value(raw)
            if password_shaped(value):
                yield "password in comment", value_start, value_start + len(value)


def _pgpass_entries(text: str, anchor_text: AnchorText) -> Iterator[re.Match[str]]:
    """The lines of `text` that are PostgreSQL password file entries (`_PGPASS_LINE`) whose
    password is real (`_is_file_password`, and not the user name again), in order."""
    checked_end = -1  # end of the last line looked at: one look per line, linear in all
    for port in _PGPASS_PORT.finditer(anchor_text.exact):
        if port.start() <= checked_end:
            continue
        first_char = line_start(text, port.start())
        newline = _LINE_BREAK.search(text, port.start())
        checked_end = newline.start() if newline else len(text)
        match = _PGPASS_LINE.match(text, first_char)
        if match is None:
            continue
        password = match.group("password")
        if password != match.group("user") and _is_file_password(password):
            yield match


def line_start(text: str, index: int) -> int:
    """Offset of the start of the line holding `text[index]` (lines end at `\n`, `\r\n` or
    `\r`); looks back no further than the previous `\n`."""
    newline = text.rfind("\n", 0, index)
    return max(newline, text.rfind("\r", newline + 1, index)) + 1


def _is_file_password(value: str) -> bool:
    """A password written in a credential file format (netrc, pgpass): password-shaped (see
    `password_shaped`) and not a well-known default (`password123`)."""
    return password_shaped(value) and value.lower() not in TRIVIAL_URL_PASSWORDS


def _comment_value(raw: str) -> str:
    """`raw` without what may follow a password in a comment: a comment closer (`*/`, `-->`)
    and trailing punctuation."""
    for closer in _COMMENT_CLOSERS:
        raw = raw.removesuffix(closer)
    return raw.rstrip(_VALUE_TRAILERS)


def password_shaped(value: str) -> bool:
    """Whether `value` looks like a password (the comment, prose, connection string and
    credential file rules): 6 or more characters with a letter and a digit or symbol, not a
    placeholder (`is_placeholder`), word such as `None`, reference, variable name (`password2`),
    glob (`*...`) or lower-case words joined by hyphens."""
    if len(value) < 6 or is_placeholder(value) or value.lower() in BARE_WORDS:
        return False
    if BARE_REFERENCE.match(value) or any(char in value for char in "$()[]{}<>,"):
        return False
    if value.startswith("*"):
        return False  # a glob or emphasis: `*all*tokens*updated*`
    if IDENTIFIER.match(value) and any(word in value.lower() for word in NAME_WORDS):
        return False  # another variable: `password2`, `db_password_v2`
    if _KEBAB_WORDS.match(value.rstrip(_VALUE_TRAILERS)):
        return False  # prose: `must-be-non-empty`, `user-defined`, `current-working-directory`
    has_letter = any(char.isalpha() for char in value)
    return has_letter and any(char.isdigit() or not char.isalnum() for char in value)


_KEBAB_WORDS = re.compile(r"[a-z]+(?:-[a-z]+)+\Z")
"""Lower-case words joined by hyphens: prose in a comment, not a password."""


def _name_strength(text: str, start: int, keyword: str, rest: str) -> bool | None:
    """None when the name around the keyword at `start` is not a secret's name; else whether
    it ends with a keyword (`DB_PASSWORD`, `SECRET_KEY`; True) or only holds one
    (`AWS_SECRET_ACCESS_KEY`, `authKey`; False)."""
    lowered_rest = rest.lower()
    continuation = len(lowered_rest) - len(lowered_rest.lstrip("abcdefghijklmnopqrstuvwxyz"))
    if continuation and rest[0].islower() == text[start + len(keyword) - 1].islower():
        # The keyword's word part goes on: `tokens`, `tokenizer`, `secretary`, `author`.
        if not lowered_rest.startswith(_KEYWORD_CONTINUATIONS.get(keyword, ())):
            return None
    if keyword in ("auth", "pwd", "pass") and start > 0:
        before = text[start - 1]
        if before.isalpha() and not (before.islower() and text[start].isupper()):
            return None  # `oauth`, `OLDPWD`; `basicAuth` is fine
    first = start
    while first > 0 and text[first - 1] in _IDENTIFIER_CHARS:
        first -= 1
    name = text[first : start + len(keyword) + len(rest)]
    if not name.isascii():
        name = name.translate(_CASE_FOLD_TABLE)
    parts = _NAME_PART.findall(name)
    last = parts[-1].lower() if parts else ""
    if last in _NON_SECRET_SUFFIXES:
        return None
    if name.lower().replace("-", "_").endswith(_STRONG_ENDINGS):
        return True
    return False if last in _SECRET_LAST_PARTS else None


def _character_kinds(value: str) -> int:
    return (
        any(char.islower() for char in value)
        + any(char.isupper() for char in value)
        + any(char.isdigit() for char in value)
    )


def _secret_shaped(value: str) -> bool:
    """An unquoted (or weakly named) value that looks like a real secret, not code."""
    if len(value) < 8 or any(char.isspace() for char in value):
        return False
    if value.lower() in BARE_WORDS or BARE_REFERENCE.match(value):
        return False
    if "$" in value or "(" in value or "[" in value or "{" in value:
        return False
    # Two kinds of letters and digits, and a digit or symbol: not a number, word or name.
    if _character_kinds(value) < 2:
        return False
    return any(char.isdigit() or (not char.isalnum() and char not in "_.-") for char in value)


def _is_url_secret(match: re.Match[str]) -> bool:
    user = match.group("user")
    password = match.group("password")
    host = match.group("host").lower()
    lowered = password.lower()
    if lowered in TRIVIAL_URL_PASSWORDS or password == user or len(password) < 4:
        return False
    if "example" in host or host.startswith(("host", "server", "domain")):
        return False
    if password.startswith(("$", "%", "{", "<", "*")) or password.endswith(("}", ">")):
        return False
    return not is_placeholder(password)


class AnchorText:
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
        self._folded: bytes | None = None
        self._found: dict[tuple[bool, bytes], list[int]] = {}

    def starts(self, anchors: tuple[bytes, ...], *, folded: bool = False) -> Iterator[int]:
        """Offsets of every occurrence of each of `anchors` in `exact` (or `folded()`), in
        ascending order. Each anchor's occurrences are found once per text, however many
        patterns share it."""
        found = []
        for anchor in anchors:
            offsets = self._found.get((folded, anchor))
            if offsets is None:
                haystack = self.folded() if folded else self.exact
                offsets = self._found[folded, anchor] = list(_occurrences(haystack, anchor))
            found.append(offsets)
        return heapq.merge(*found) if len(found) > 1 else iter(found[0])

    def folded(self) -> bytes:
        if self._folded is None:
            self._folded = self._fold()
        return self._folded

    def _fold(self) -> bytes:
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


def anchored_matches(
    pattern: re.Pattern[str], text: str, starts: Iterable[int]
) -> Iterator[re.Match[str]]:
    """What `pattern.finditer(text)` yields, for a pattern whose matches are never empty and
    always start at one of `starts` (ascending; `AnchorText.starts` of its anchors).

    The pattern is tried, anchored, at each start in order (`match` at a position still sees
    the characters before it, for lookbehinds and `\\b`); as with `finditer`, a match only
    counts if it starts at or after the end of the previous one.
    """
    end = 0
    for start in starts:
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


def is_placeholder(value: str, *, token: bool = False) -> bool:
    """Whether `value` (or a provider key's random part) stands for a secret rather than
    being one. The one placeholder rule of the provider formats (`_is_token`, with `token`),
    assignments, bearer tokens, URLs and comments:

    - it holds a word of `PLACEHOLDER_WORDS` (`example`, `placeholder`, `redacted`, `dummy`,
      `changeme`, `replace`, `your`, `todo`, `xxxx`, `****`, `${`, `{{`, `process.env`, ...),
      in any case, or `xxx` / `XXX` (a key's random part: only `xxxx` / `XXXX`, which random
      keys hold far more rarely);
    - it ends with an ellipsis (`sk-ant-api03-...`, `abc123…`);
    - except in a key's random part: it is a template reference (`<value>`, `{name}`,
      `%(name)s`, `%s`, `$NAME`) — a key's percent-encoding (`%3d`, `%2f` in an Azure SAS
      signature) is not one;
    - it has at most two distinct characters (`************`, `aaaaaaaaaaaa`).
    """
    lowered = value.lower()
    run = "xxxx" if token else "xxx"
    if any(word in lowered for word in PLACEHOLDER_WORDS) or run in value or run.upper() in value:
        return True
    if value.endswith(ELLIPSES):
        return True
    if not token and TEMPLATE_PLACEHOLDER.search(value):
        return True
    return len(set(value)) <= 2  # "************", "aaaaaaaaaaaa", "-----------"


_EXACT_ANCHORS = frozenset(
    [
        *_PRIVATE_KEY_ANCHORS,
        *URL_ANCHORS,
        *_NETRC_ANCHORS,
        *(anchor for shape in _TOKENS if not shape.folded for anchor in shape.anchors),
    ]
)
_FOLDED_ANCHORS = frozenset(
    [
        *_BEARER_ANCHORS,
        *_SECRET_NAME_ANCHORS,
        *_LOOSE_PASSWORD_ANCHORS,
        *(anchor for shape in _TOKENS if shape.folded for anchor in shape.anchors),
    ]
)
TOKEN_KINDS = frozenset(shape.kind for shape in _TOKENS)
"""The kinds (`secret_reason` reasons) of the provider key formats."""


MIN_SECRET_LINE_CHARS = 6
"""`secret_lines` keeps the lines of a secret this long or longer."""


def secret_lines(text: str) -> tuple[str, ...]:
    """The distinct lines (`MIN_SECRET_LINE_CHARS` or more characters, surrounding spaces
    removed) of every secret `secret_spans` finds in `text`, longest first; () when it holds
    none. A piece cut out of `text` may hold such a line without what made it recognisable
    (a private key's body without its `BEGIN` line)."""
    if not may_hold_secret(text):
        return ()
    lines = {
        line.strip()
        for span in secret_spans(text)
        for line in _LINE_BREAK.split(text[span.start : span.end])
        if len(line.strip()) >= MIN_SECRET_LINE_CHARS
    }
    return tuple(sorted(lines, key=lambda line: (-len(line), line)))
