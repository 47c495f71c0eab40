"""What may be indexed (docs/reference.md §3.9): exclusion by name, decoding, sniffing, secrets.

Fake credentials are assembled at run time so that this file itself holds no token-shaped
string (it must stay indexable, and secret scanners must not flag it).
"""

from __future__ import annotations

import base64
import codecs
import hashlib
import os
import re
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ds4_core.privacy.secrets import (
    _CASE_FOLD_FIXES,
    _LOOSE_PASSWORD,
    _LOOSE_PASSWORD_ANCHORS,
    _TOKENS,
    _anchored_matches,
    _AnchorText,
    secret_reason,
)
from ds4_core.project.filters import decode_text, path_exclusion, read_indexable

# Token-shaped fakes, built from pieces.
PEM_HEADER = "-----BEGIN " + "RSA PRIVATE" + " KEY-----"
OPENSSH_HEADER = "-----BEGIN " + "OPENSSH PRIVATE" + " KEY-----"
AWS_KEY = "AK" + "IA" + "Q3EGUWLZ7XMN4PRT"
AWS_SESSION_KEY = "AS" + "IA" + "Q3EGUWLZ7XMN4PRT"
AWS_DOC_KEY = "AK" + "IA" + "IOSFODNN7EXAMPLE"
GITHUB_TOKEN = "gh" + "p_" + "x7Kq2Lm9Pz4Rt8Vw3Yb6Nc1Hd5Jf0GsAe"
GITHUB_PAT = "github" + "_pat_" + "11ABCDEFG0aBcDeFgHiJkL_mNoPqRsTuVwXyZ0123456789"
GITLAB_TOKEN = "gl" + "pat-" + "Zx8Yw7Vu6Ts5Rq4Po3Nm"
SLACK_TOKEN = "xo" + "xb-" + "2945812-99887766554-AbCdEfGhIjKl"
REAL_LOOKING = "Tq9" + "vX2mLr8kZp4W"  # 15 characters, no placeholder words


@pytest.mark.parametrize(
    ("rel_path", "reason"),
    [
        ("node_modules/react/index.js", "ignored directory node_modules"),
        ("web/node_modules/react/index.js", "ignored directory node_modules"),
        (".venv/lib/python3.11/site.py", "ignored directory .venv"),
        ("src/__pycache__/app.cpython-311.pyc", "ignored directory __pycache__"),
        (".git/config", "ignored directory .git"),
        ("target/debug/main.rs", "ignored directory target"),
        ("dist/", "ignored directory dist"),
        ("assets/logo.png", "binary extension .png"),
        ("assets/LOGO.PNG", "binary extension .png"),
        ("lib/native.so", "binary extension .so"),
        ("data/app.sqlite", "binary extension .sqlite"),
        ("static/app.min.js", "minified"),
        ("static/site.min.css", "minified"),
        ("static/app.js.map", "source map"),
        ("package-lock.json", "lockfile"),
        ("rust/Cargo.lock", "lockfile"),
        ("yarn.lock", "lockfile"),
        ("poetry.lock", "lockfile"),
        (".env", "secret file name"),
        (".env.local", "secret file name"),
        ("deploy/.env.production", "secret file name"),
        (".netrc", "secret file name"),
        (".npmrc", "secret file name"),
        (".pypirc", "secret file name"),
        ("credentials", "secret file name"),
        ("config/credentials.json", "secret file name"),
        ("secrets.yaml", "secret file name"),
        ("home/.ssh/id_rsa", "secret file name"),
        ("id_ed25519", "secret file name"),
        ("tls/server.key", "secret file name"),
        ("tls/cert.pem", "secret file name"),
        ("android/release.keystore", "secret file name"),
        ("certs/client.p12", "secret file name"),
        (".git-credentials", "secret file name"),
        ("home/.pgpass", "secret file name"),
        ("www/.htpasswd", "secret file name"),
        ("_netrc", "secret file name"),
        ("etc/shadow", "secret file name"),
        ("etc/gshadow", "secret file name"),
        ("etc/shadow-", "secret file name"),
        (".ssh/id_ecdsa", "secret file name"),
        (".ssh/id_ed25519_sk", "secret file name"),
        (".dockercfg", "secret file name"),
        ("backup/.PGPASS", "secret file name"),  # names are compared case-insensitively
    ],
)
def test_excluded_names_give_their_reason(rel_path: str, reason: str) -> None:
    assert path_exclusion(rel_path) == reason


@pytest.mark.parametrize(
    "rel_path",
    [
        "src/app.py",
        "README.md",
        "scripts/build",  # a file named like an ignored directory is a file
        "docs/building.md",
        "src/builder/main.go",
        "id_rsa.pub",  # a public key is not a secret
        "environment.ts",
        "src/.envrc.example.md",
        "app.js",
        "maps/world.json",
        "src/shadow.ts",  # a UI shadow, not the password file
        "styles/shadows/",
        "etc/passwd",  # user names, no password hashes
        "docs/htpasswd.md",
        "src/.htpasswd.example.txt",
    ],
)
def test_ordinary_source_paths_are_not_excluded(rel_path: str) -> None:
    assert path_exclusion(rel_path) is None


# --- decode_text ---------------------------------------------------------------------------


def test_utf8_bom_is_dropped() -> None:
    assert decode_text(codecs.BOM_UTF8 + "print('hé')\n".encode()) == ("print('hé')\n", None)


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_utf16_with_bom_is_decoded(encoding: str) -> None:
    bom = codecs.BOM_UTF16_LE if encoding.endswith("le") else codecs.BOM_UTF16_BE
    source = "def greet():\r\n    return '你好'\r\n"
    assert decode_text(bom + source.encode(encoding)) == (source, None)


def test_utf32_is_skipped_with_a_reason() -> None:
    text, reason = decode_text(codecs.BOM_UTF32_LE + "x = 1\n".encode("utf-32-le"))
    assert text is None
    assert reason == "unsupported encoding UTF-32"


def test_nul_byte_marks_binary_without_any_extension() -> None:
    data = b"ELF\x02\x01\x01" + b"\x00" * 12 + b"some readable strings" * 20
    assert decode_text(data) == (None, "binary")


def test_nul_after_the_sniff_window_is_not_binary_by_itself() -> None:
    data = b"a = 1\n" * 2000 + b"\x00"  # 12,000 bytes; the NUL is past 8 KiB
    text, reason = decode_text(data)
    assert reason is None
    assert text is not None and text.startswith("a = 1\n")


def test_control_heavy_bytes_are_binary() -> None:
    data = (b"abcdefghi\x01" * 100) + b"\n"  # 10% control bytes, no NUL
    assert decode_text(data) == (None, "binary")


def test_tabs_form_feeds_and_escapes_within_limit_are_text() -> None:
    data = b"\tindent\f\x0bpage\r\n" * 50 + b"\x1b[31mred\x1b[0m\n"  # ESC < 5%
    text, reason = decode_text(data)
    assert reason is None and text is not None


def test_badly_malformed_utf8_is_skipped_but_a_few_bad_bytes_are_not() -> None:
    bad = b"caf\xe9 " * 50  # Latin-1 text: 50 invalid bytes in 250
    assert decode_text(bad) == (None, "malformed text")
    few = b"x = 'caf\xe9'\n" + b"y = 2\n" * 100
    text, reason = decode_text(few)
    assert reason is None and text is not None and "\ufffd" in text


def test_one_data_uri_line_among_twenty_is_not_minified() -> None:
    """icons.ts: the index cuts the long line (`windows.cut_long_lines`) and keeps the rest."""
    data = b"export const A = 1;\n" * 20 + b"export const I = 'data:," + b"Q" * 60_000 + b"';\n"
    text, reason = decode_text(data)
    assert reason is None and text is not None


@given(
    before=st.integers(min_value=0, max_value=40),
    after=st.integers(min_value=0, max_value=40),
    uri_chars=st.integers(min_value=5_001, max_value=200_000),
)
@example(before=8, after=0, uri_chars=60_000)  # the reported icons.ts: 9 lines, 1 data URI
@example(before=0, after=1, uri_chars=60_000)
def test_a_data_uri_line_is_never_the_reason_a_file_with_code_is_skipped(
    before: int, after: int, uri_chars: int
) -> None:
    """icons.ts with any number (at least one) of ordinary lines around one overlong data-URI
    line decodes (the index cuts that line and keeps the rest searchable)."""
    if before + after == 0:
        after = 1
    code = "".join(f"export const iconGlyph{n} = 'glyph_{n}';\n" for n in range(before))
    uri = "export const LOGO = 'data:image/png;base64," + "Q" * uri_chars + "';\n"
    tail = "export function renderBrandLogo(size) { return LOGO; }\n" * after
    text, reason = decode_text((code + uri + tail).encode())
    assert reason is None and text is not None


@pytest.mark.parametrize(
    "data",
    [
        b"!function(e){return e};" * 3000,  # a one-line bundle (.min.js without its name)
        b"!function(e){return e};" * 3000 + b"\n",
        b"\n\n" + b"a{color:red}" * 2000 + b"\n\n" + b"b{color:blue}" * 2000 + b"\n",
        b"/* x */\n" + (b"var q=[1,2,3];" * 600 + b"\n") * 3,  # one word outside huge lines
        b"var a=1;" * 700 + b"\n" + b"x\n" * 5,  # one-letter lines only: nothing to search
    ],
    ids=["one-line", "one-line-newline", "css-blank-lines", "comment-word", "one-letter-lines"],
)
def test_little_but_overlong_lines_is_minified(data: bytes) -> None:
    """Cutting the overlong lines would leave fewer than 3 words: skipped as `minified`."""
    assert decode_text(data) == (None, "minified")


def test_minified_by_mean_line_length() -> None:
    data = (b"y" * 1200 + b"\n") * 10  # every line 1,200 characters (below 5,000)
    assert decode_text(data) == (None, "minified")


def test_long_but_ordinary_source_is_not_minified() -> None:
    data = (b"z" * 900 + b"\r\n") * 20 + (b"w" * 4900 + b"\n") + b"short line\n" * 20
    text, reason = decode_text(data)
    assert reason is None and text is not None


def test_empty_file_is_empty_text() -> None:
    assert decode_text(b"") == ("", None)


# --- secret_reason -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (f"{PEM_HEADER}\nMIIEowIBAAKCAQEA\n", "private key"),
        (f"key = '''\n{OPENSSH_HEADER}\nb3BlbnNzaC1rZXktdjE=\n'''", "private key"),
        (f"aws_access_key_id = {AWS_KEY}\n", "AWS access key id"),
        (f"AWS={AWS_SESSION_KEY}", "AWS access key id"),
        (f"export GH={GITHUB_TOKEN}\n", "GitHub token"),
        (f"url: https://{GITHUB_PAT}@github.com/x/y\n", "GitHub token"),
        (f"CI_TOKEN_VALUE {GITLAB_TOKEN}\n", "GitLab token"),
        (f"slack({SLACK_TOKEN!r})", "Slack token"),
        (f'password = "{REAL_LOOKING}"\n', "secret assignment (password)"),
        (f"DB_PASSWORD='{REAL_LOOKING}'\n", "secret assignment (password)"),
        (f'API_KEY: "{REAL_LOOKING}"\n', "secret assignment (api_key)"),
        (f'{{"client_secret": "{REAL_LOOKING}"}}', "secret assignment (client_secret)"),
        (f'  githubToken: "{REAL_LOOKING}",\n', "secret assignment (token)"),
        (f'    token: str = "{REAL_LOOKING}"\n', "secret assignment (token)"),
        (f"$config['secret'] => '{REAL_LOOKING}';", "secret assignment (secret)"),
        (
            f'headers = {{"Authorization": "Bearer {REAL_LOOKING}"}}',
            "secret assignment (authorization)",
        ),
    ],
)
def test_high_confidence_secrets_are_found(text: str, kind: str) -> None:
    reason = secret_reason(text)
    assert reason == kind
    for secret in (REAL_LOOKING, AWS_KEY, GITHUB_TOKEN, GITHUB_PAT, GITLAB_TOKEN, SLACK_TOKEN):
        assert secret not in (reason or "")


@pytest.mark.parametrize(
    "text",
    [
        'password = "changeme-changeme"\n',
        'api_key = "${OPENAI_API_KEY}"\n',
        'token: "{{ vault_token_value }}"\n',
        "client_secret = 'process.env.CLIENT_SECRET'\n",
        'API_KEY = "<your-api-key-here>"\n',
        'api_key = "your_api_key_here"\n',
        'password = "example-password"\n',
        'secret = "REDACTED_FOR_DOCS"\n',
        'token = "dummy-token-for-tests"\n',
        'password = "************"\n',
        'password = "{db_password_from_vault}"\n',  # a format-string template
        'dsn_password = "%(db_password)s"\n',
        'token = "$GITHUB_TOKEN_VALUE"\n',
        'password = "short"\n',  # fewer than 12 characters
        "password = os.environ['DB_PASSWORD']\n",  # not a quoted literal
        'if password == "correcthorsebattery":\n',  # a comparison, not an assignment
        'max_tokens = "unbounded-value-x"\n',  # `tokens` is not `token`
        f"aws_access_key_id = {AWS_DOC_KEY}\n",  # AWS documentation key
        "The header is -----BEGIN CERTIFICATE----- and nothing private.\n",
        "Tokens look like ghp_ followed by 36 characters.\n",
    ],
)
def test_placeholders_and_ordinary_code_are_kept(text: str) -> None:
    assert secret_reason(text) is None


# --- secret_reason: shapes found since the anchored rewrite ---------------------------------
#
# Every secret-shaped value is assembled here at run time from short pieces.


def fake(length: int, *, salt: str = "") -> str:
    """A random-looking value of `length` characters: mixed case and digits, no words."""
    pieces = ["Tq9", "vX2", "mLr", "8kZ", "p4W", "b7Y", "c3N", "f6H"]
    chars = "".join(pieces[(i + len(salt)) % len(pieces)] for i in range(length // 3 + 1))
    return chars[:length]


STRIPE_LIVE = "sk" + "_live_" + fake(24)
STRIPE_TEST = "sk" + "_test_" + fake(24)
STRIPE_RESTRICTED = "rk" + "_live_" + fake(24)
STRIPE_PUBLISHABLE = "pk" + "_live_" + fake(24)
GOOGLE_KEY = "AI" + "za" + fake(35)
DJANGO_KEY = "django-" + "insecure-" + fake(28).lower()
AWS_SECRET = fake(40)
BEARER = fake(32)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        # (a) names that contain a keyword
        (f'SECRET_KEY = "{DJANGO_KEY}"\n', "secret assignment (secret)"),
        (f'AWS_SECRET_ACCESS_KEY = "{AWS_SECRET}"\n', "secret assignment (secret)"),
        (f"aws_access_key = '{AWS_SECRET}'\n", "secret assignment (access_key)"),
        (f'clientSecret: "{REAL_LOOKING}"\n', "secret assignment (client_secret)"),
        (f'{{"client_secret": "{REAL_LOOKING}"}}', "secret assignment (client_secret)"),
        (f'private_key_passphrase = "{REAL_LOOKING}"\n', "secret assignment (private_key)"),
        (f'authKey: "{REAL_LOOKING}"\n', "secret assignment (auth)"),
        (f'author_token = "{REAL_LOOKING}"\n', "secret assignment (token)"),
        (f'DB_PWD = "{REAL_LOOKING}"\n', "secret assignment (pwd)"),
        (f'smtp_passwd = "{REAL_LOOKING}"\n', "secret assignment (passwd)"),
        # (b) unquoted values in configuration files
        ("POSTGRES_PASSWORD: hunter2" + "hunter2\n", "secret assignment (password)"),
        (f"export AWS_SECRET_ACCESS_KEY={AWS_SECRET}\n", "secret assignment (secret)"),
        ("[db]\npassword = s3cr3t" + "v4lu3\nhost = db\n", "secret assignment (password)"),
        ("db.pass" + "word=" + fake(12) + "\n", "secret assignment (password)"),
        ("API_TO" + "KEN=" + fake(16), "secret assignment (token)"),  # `.env`, no final newline
        ("  api_" + "key: " + fake(20) + "  # production\n", "secret assignment (api_key)"),
        # (c) credentials in URLs
        (
            "DATABASE_URL=postgres://app:" + fake(12) + "@db.internal:5432/app\n",
            "credentials in URL",
        ),
        ("url = 'redis://:" + fake(12) + "@cache:6379/0'\n", "credentials in URL"),
        ("amqp://guest2:" + fake(10) + "@rabbit/\n", "credentials in URL"),
        # (d) bearer tokens
        ("Authorization: Bearer " + BEARER + "\n", "bearer token"),
        (f'curl -H "Authorization: Bearer {BEARER}" https://api\n', "bearer token"),
        (f"headers['Authorization'] = 'Bearer {BEARER}'\n", "bearer token"),
        # (e) more token shapes
        (f'stripe.api_key = "{STRIPE_LIVE}"', "Stripe key"),
        (f"STRIPE={STRIPE_TEST}", "Stripe key"),
        (f"key: {STRIPE_RESTRICTED}", "Stripe key"),
        (f"<script>Stripe('{STRIPE_PUBLISHABLE}')</script>", "Stripe key"),
        (f"maps.js?key={GOOGLE_KEY}&v=3", "Google API key"),
    ],
)
def test_new_secret_shapes_are_found(text: str, kind: str) -> None:
    reason = secret_reason(text)
    assert reason == kind
    for secret in (DJANGO_KEY, AWS_SECRET, BEARER, STRIPE_LIVE, GOOGLE_KEY, REAL_LOOKING):
        assert secret not in (reason or "")


@pytest.mark.parametrize(
    "text",
    [
        "password = get_password()\n",
        "token = request.headers['X-Token']\n",
        'token = request.headers["Authorization"]\n',
        "password = None\n",
        "password: null\n",
        "secret: true\n",
        "api_key: 12345678901234\n",  # numbers only
        "password = os.environ['DB_PASSWORD']\n",
        "API_KEY = os.getenv('API_KEY')\n",
        "token = self.token\n",
        "access_key = settings.AWS_ACCESS_KEY_ID\n",
        "password = password2\n",  # another variable
        "password=self.password2\n",
        "    token=token_value,\n",
        "token = next(tokens)\n",
        "token = tokens[0]\n",
        "if token == TOKEN_END:\n",
        "password: ${DB_PASSWORD}\n",
        "PASSWORD=$DB_PASSWORD\n",
        'export TOKEN="$(cat /run/secrets/token)"\n',
        "token: ${{ secrets.GITHUB_TOKEN }}\n",
        "password: !vault |\n",
        "password: *default_password\n",
        "secret_key = config['SECRET_KEY']\n",
        "password: str\n",
        "password: Incomplete\n",  # a stub's annotation
        "token = Punctuation\n",
        "def login(password: str, token: Optional[str] = None):\n",
        "self.auth = HTTPBasicAuth(user, pw)\n",
        "PWD=/home/user/project\n",
        "secret_key_path = '/etc/ssl/private/server.pem'\n",
        'TOKEN_URL = "https://oauth2.googleapis.com/token"\n',
        'tokenizer_name = "bert-base-uncased-v2"\n',
        "max_tokens = 4096\n",
        'author = "Guido van Rossum"\n',
        'AUTHOR = "Guido van Rossum"\n',
        f'oauth = "{REAL_LOOKING}"\n',  # `auth` is not a word part of `oauth`
        f'"auth0": "types-auth0-{REAL_LOOKING}"\n',
        'token_type = "refresh_token"\n',
        'password_help = "Enter your password here"\n',
        '"SecretArn": "arn:aws:secretsmanager:us-west-2:123456789012:secret:db-1AbCdE"\n',
        'token_range = "%d,%d-%d,%d:"\n',
        'password = "%(pw)s and more"\n',
        "passwords = ['abc123def456']\n",
        "http://user:password@example.com/\n",
        "postgres://postgres:postgres@localhost/db\n",
        "redis://:${REDIS_PASSWORD}@redis:6379\n",
        "https://user:<password>@host.internal/\n",
        "ftp://anonymous:***@ftp.internal/\n",
        "Authorization: Bearer <token>\n",
        "Authorization: Bearer ${TOKEN}\n",
        "the Bearer authentication scheme is described in RFC 6750\n",
        "sk" + "_live_" + "short\n",
    ],
)
def test_ordinary_code_and_config_lines_are_not_secrets(text: str) -> None:
    assert secret_reason(text) is None


# Pieces of texts for the robustness test: names, separators, values, token pieces, benign
# code, and the non-ASCII letters that `(?i)` matches to ASCII ones.
_NAMES = [
    "password", "PASSWORD", "Passwd", "pwd", "api_key", "API-KEY", "apiKey", "api", "auth",
    "authorization", "Authorization", "client_secret", "clientSecret", "private_key",
    "access_key", "secret", "SECRET_KEY", "token", "Token", "tokens", "secretoken", "DB_",
    "x.", "my-", "github", "\u017fecret", "ap\u0131_key", "author\u0130zation", "api_\u212aey",
    "\u017f", "\u0131", "\u0130", "\u212a", "Bearer ", "bearer\t", "://", "@", "export ",
]  # fmt: skip
_SEPARATORS = [
    "=", ":", ":=", "=>", "==", " = ", ": ", ": str = ", "[", "]", "['", "']", '"]', '"', "'",
    "`", " ", "\t", "\n", "\r", "\r\n", "$", "{", "}", "#", "(", ")",
]  # fmt: skip
_VALUES = [
    REAL_LOOKING, fake(8), fake(40), "x" * 12, "${X}", "{{x}}", "%(name)s", "$VAR", "<value>",
    "****", "\u00e9" * 12, "\u212a" * 12, "\u2014", "\U0001f600", "\ud800", "user:pa55word",
]  # fmt: skip
_TOKEN_PIECES = [
    "AK" + "IA", "gh" + "p_", "gl" + "pat-", "xo" + "xb-", "sk" + "_live_", "k_test_", "AI" + "za",
    "-----BEGIN ", "PRIVATE" + " KEY", "-----", "0123456789",
    "gh" + "s_", "gl" + "dt-", "GR" + "1348941", "sk" + "-", "sk" + "-proj-", "sk" + "-ant-api03-",
    "np" + "m_", "py" + "pi-AgEIcHlwaS5vcmc", "h" + "f_", "xa" + "pp-1-", "hooks.sl" + "ack.com/",
    "wh" + "sec_", "GOC" + "SPX-", "ya" + "29.", "Account" + "Key=", "SharedAccess" + "Key=", "x", "&si" + "g=", "ab" + "c8Q~",
    "root:" + "$6$", "# pass" + "word: ", ";Pass" + "word=", ";",
]  # fmt: skip
_FRAGMENT = st.one_of(
    st.sampled_from(_NAMES),
    st.sampled_from(_SEPARATORS),
    st.sampled_from(_VALUES),
    st.sampled_from(_TOKEN_PIECES),
    st.text(max_size=14),
)
_TEXTS = st.lists(_FRAGMENT, max_size=20).map("".join)


@settings(max_examples=500, deadline=None)
@given(text=_TEXTS)
@example(text="")
@example(text="\ud800 token = " + REAL_LOOKING)
@example(text="auth")  # a keyword at the very start and end
@example(text="://:@")
def test_secret_reason_never_raises_and_never_reveals(text: str) -> None:
    reason = secret_reason(text)
    assert reason is None or isinstance(reason, str)
    for value in (REAL_LOOKING, fake(40)):
        assert value not in (reason or "")


def test_case_fold_fixes_list_every_non_ascii_match_of_an_ascii_letter() -> None:
    # The fast path finds names in an ASCII copy of the text; it relies on this list being
    # complete for the running Python's Unicode database.
    letter = re.compile("(?i)[a-z]")
    found = [char for char in map(chr, range(0x80, 0x110000)) if letter.match(char)]
    as_letter = {
        char: next(ord(x) for x in "abcdefghijklmnopqrstuvwxyz" if re.match(f"(?i){x}", char))
        for char in found
    }
    assert as_letter == dict(_CASE_FOLD_FIXES)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (f'\u017fecret = "{REAL_LOOKING}"', "secret assignment (\u017fecret)"),
        (
            f'\u00e9\u0130 DB_PA\u017f\u017fWORD = "{REAL_LOOKING}"',
            "secret assignment (pa\u017f\u017fword)",
        ),
        (f'secretoken = "{REAL_LOOKING}"', "secret assignment (token)"),
        (f'password = "example token="{REAL_LOOKING}"', None),
        (f'password = "example-value-x" or token = "{REAL_LOOKING}"', "secret assignment (token)"),
        ("gl" + "pat-EXAMPLE" + "x" * 20 + "-gl" + "pat-" + "y" * 20, None),
        (f"tokens = 1\nauthor_token = '{REAL_LOOKING}'", "secret assignment (token)"),
    ],
)
def test_secret_assignment_edge_cases(text: str, kind: str | None) -> None:
    assert secret_reason(text) == kind


# --- secret_reason: the providers' key formats ----------------------------------------------
#
# Every value is assembled at run time from a prefix and `fake` characters, so that no
# realistic key is ever committed.


def fake_letters(length: int) -> str:
    """Random-case letters only, like a Hugging Face token's body."""
    pieces = ["KwP", "cYd", "QLy", "XUb", "whX", "hsR", "UVm", "jpB"]
    return "".join(pieces[i % len(pieces)] for i in range(length // 3 + 1))[:length]


def base64_of(seed: str, length: int) -> str:
    """`length` characters of standard base64 derived from `seed` (a real-looking key body)."""
    data = hashlib.sha512(seed.encode()).digest() * (length // 64 + 1)
    return base64.b64encode(data).decode()[:length]


def shaped_hash(seed: str) -> str:
    """A crypt(3)-style hash tail: letters, digits, `.` and `/`."""
    return base64_of(seed, 86).replace("+", ".")


PROVIDER_KEYS = [
    ("sk" + "-proj-" + fake(74, salt="a") + "T3Blbk" + "FJ" + fake(74, salt="b"), "OpenAI key"),
    ("sk" + "-svcacct-" + fake(60, salt="c") + "_" + fake(40), "OpenAI key"),
    ("sk" + "-admin-" + fake(60, salt="d"), "OpenAI key"),
    ("sk" + "-" + fake(20) + "T3Blbk" + "FJ" + fake(20, salt="e"), "OpenAI key"),
    ("sk" + "-ant-api03-" + fake(93, salt="f") + "AA", "Anthropic key"),
    ("sk" + "-ant-admin01-" + fake(93, salt="g") + "AA", "Anthropic key"),
    ("gh" + "o_" + fake(36), "GitHub token"),
    ("gh" + "u_" + fake(36, salt="h"), "GitHub token"),
    ("gh" + "s_" + fake(36, salt="ij"), "GitHub token"),
    ("gh" + "r_" + fake(76, salt="k"), "GitHub token"),
    ("gl" + "dt-" + fake(20), "GitLab token"),
    ("gl" + "rt-" + fake(20, salt="l"), "GitLab token"),
    ("gl" + "cbt-" + "64_" + fake(20, salt="m"), "GitLab token"),
    ("np" + "m_" + fake(36, salt="n"), "npm token"),
    ("py" + "pi-AgEIcHlwaS5vcmc" + base64_of("pypi", 120).replace("+", "-").replace("/", "_"), "PyPI token"),
    ("h" + "f_" + fake_letters(34), "Hugging Face token"),
    ("xo" + "xp-" + "2945812-99887766554-" + fake(32), "Slack token"),
    ("xo" + "xa-2-" + fake(40), "Slack token"),
    ("xo" + "xr-" + fake(40), "Slack token"),
    ("xa" + "pp-1-A0" + "3JBK8SWLM-4809112233445-" + fake(64).lower(), "Slack token"),
    ("https://hooks.sl" + "ack.com/services/T0" + "4BZ3VJKLM/B0" + "5C9KQ2NHP/" + fake(24), "Slack webhook"),
    ("wh" + "sec_" + fake(32, salt="o"), "Stripe key"),
    ("rk" + "_test_" + fake(24, salt="p"), "Stripe key"),
    ("GOC" + "SPX-" + fake(28, salt="q"), "Google OAuth secret"),
    ("ya" + "29." + fake(120, salt="r"), "Google OAuth token"),
    (
        "DefaultEndpointsProtocol=https;AccountName=shopdata;Account" + "Key="
        + base64_of("storage", 86) + "==;EndpointSuffix=core.windows.net",
        "Azure key",
    ),
    (
        "Endpoint=sb://shop.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccess"
        + "Key=" + base64_of("bus", 43) + "=",
        "Azure key",
    ),
    (
        "https://shopdata.blob.core.windows.net/c/a.csv?sv=2022-11-02&sp=r&se=2030-01-01&si"
        + "g=" + base64_of("sas", 43).replace("+", "%2B").replace("/", "%2F") + "%3D",
        "Azure SAS signature",
    ),
    ("client_id = 'x'\nAZ_CS = " + "Ab1" + "8Q~" + fake(34, salt="s").replace("Z", "~"), "Azure client secret"),
    ("root:" + "$6$" + "Zc9sL2xQ$" + shaped_hash("root") + ":19700:0:99999:7:::", "password hash"),
    ("admin:" + "$apr1$" + "r31.....$" + shaped_hash("admin")[:22], "password hash"),
    ("deploy:" + "$2y$" + "10$" + shaped_hash("deploy")[:53], "password hash"),
]  # fmt: skip


@pytest.mark.parametrize(("value", "kind"), PROVIDER_KEYS)
@pytest.mark.parametrize(
    "context",
    ["{}", "KEY={}\n", 'client = Client(api_key="{}")\n', "  token: '{}'  # prod\n", "`{}`"],
)
def test_provider_key_formats_are_found(value: str, kind: str, context: str) -> None:
    reason = secret_reason(context.format(value))
    assert reason == kind
    assert value not in reason


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("# pass" + "word: hunter2\n", "password in comment"),
        ("    // pwd = " + fake(7) + "\n", "password in comment"),  # 7: short for an assignment
        ("/* root pass" + "word: " + fake(9) + " */\n", "password in comment"),
        ("<!-- the admin pass" + "word is " + fake(10) + ", do not share -->\n", "password in comment"),
        ("-- passw" + "ord: " + fake(8) + " (staging)\n", "password in comment"),
        ("x = connect()  # pass" + "phrase: " + fake(12) + "\n", "password in comment"),
        ("Server=db;User Id=shop;Pass" + "word=" + fake(14) + ";\n", "credentials in connection string"),
        ('dsn = "Host=db;Database=shop;Pw' + 'd=' + fake(11) + '"\n', "credentials in connection string"),
        ("jdbc:sqlserver://db;user=shop;pass" + "word=" + fake(9) + ";database=shop\n", "credentials in connection string"),
        ('{"SecretAccess' + 'Key": "' + base64_of("aws", 40) + '"}', "secret assignment (secret)"),
        ("aws_secret_access" + "_key = " + base64_of("aws2", 40) + "\n", "secret assignment (secret)"),
        (
            '{"type": "service_account", "private_key_id": "' + "0f" * 20 + '", "private_key": "'
            + "-----BEGIN " + "PRIVATE" + " KEY-----\\nMIIEv" + fake(60) + '\\n"}',
            "private key",
        ),
    ],
)  # fmt: skip
def test_passwords_in_comments_and_connection_strings_are_found(text: str, kind: str) -> None:
    assert secret_reason(text) == kind


_SRI = base64_of("left-pad", 86) + "=="
_SHA256 = hashlib.sha256(b"left-pad").hexdigest()


@pytest.mark.parametrize(
    "text",
    [
        # lockfiles and digests
        f'"integrity": "sha512-{_SRI}",\n',
        f"  integrity sha512-{_SRI}\n",
        f"    resolution: {{integrity: sha512-{_SRI}}}\n",
        f'<script src="a.js" integrity="sha384-{_SRI[:64]}" crossorigin="anonymous">\n',
        f"FROM python@sha256:{_SHA256}\n",
        f"github.com/x/y v1.2.3 h1:{_SRI[:43]}=\n",
        f"commit {_SHA256[:40]}\nMerge: {_SHA256[:7]} {_SHA256[8:15]}\n",
        "request_id = 4f1c2a9e-8d3b-4c6e-9a7f-2b1d0e5c8a3f\n",
        # placeholders
        "OPENAI_API_KEY=sk-...\n",
        'api_key = "sk-proj-..."\n',
        "export OPENAI_API_KEY=sk-" + "x" * 48 + "\n",
        "export ANTHROPIC_API_KEY=sk-ant-api03-" + "X" * 93 + "AA\n",
        'client = OpenAI(api_key="<your-api-key>")\n',
        'client = OpenAI(api_key="YOUR_API_KEY")\n',
        "api_key: ${OPENAI_API_KEY}\n",
        "const key = process.env.OPENAI_API_KEY;\n",
        'key = os.environ["ANTHROPIC_API_KEY"]\n',
        "GITHUB_TOKEN=gh" + "p_" + "x" * 36 + "\n",
        "HF_TOKEN=h" + "f_" + "x" * 34 + "\n",
        "webhook: https://hooks.sl" + "ack.com/services/T00000000/B00000000/" + "X" * 24 + "\n",
        "DefaultEndpointsProtocol=https;AccountName=a;Account" + "Key=<account-key>;\n",
        "Account" + "Key=${STORAGE_KEY};\n",
        "UseDevelopmentStorage=true;AccountName=devstoreaccount1;Account" + "Key="
        + "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==\n",
        # code that merely looks like a prefix
        "model = h" + "f_AutoModelForSequenceClassification.from_pretrained(name)\n",
        "npm_config_registry=https://registry.npmjs.org/\n",
        "slack_client.post(xo" + "xb-not-a-real-token)\n",
        "task-" + "a" * 40 + ", disk-" + fake(40) + "\n",  # `\\bsk-` needs a word start
        "sk-" + "0123456789" * 4 + "\n",  # digits only
        # passwords mentioned, not written
        "# pass" + "word: must be 8+ characters, see docs\n",
        "# the pass" + "word is hashed with bcrypt\n",
        "// pass" + "word: ${DB_PASSWORD}\n",
        "# pass" + "word: <your-password>\n",
        "# pass" + "word = password2\n",
        "# pw" + "d = os.getcwd()\n",
        "Server=db;Pass" + "word=password123;\n",
        "Server=db;Pass" + "word={password};\n",
        "login(user, pass" + "word=pw123456);\n",
        '  $ shop users create --name=u1 --pass' + 'word="secure1" --admin\n',  # an option
        "    --location=us-east4 --admin-pass" + "word=123Abpassdord \\\n",
        "hash = bcrypt.hashpw(pass" + "word, salt)  # $2b$12$...\n",
    ],
)  # fmt: skip
def test_digests_placeholders_and_lookalikes_are_not_secrets(text: str) -> None:
    assert secret_reason(text) is None


@settings(max_examples=300, deadline=None)
@given(text=_TEXTS)
def test_anchored_token_search_finds_what_a_full_scan_finds(text: str) -> None:
    """Each token pattern, tried only at its anchors, matches exactly what `finditer` does."""
    anchor_text = _AnchorText(text)
    for shape in _TOKENS:
        starts = anchor_text.starts(shape.anchors, folded=shape.folded)
        anchored = _anchored_matches(shape.pattern, text, starts)
        assert [m.span() for m in anchored] == [m.span() for m in shape.pattern.finditer(text)]
    starts = anchor_text.starts(_LOOSE_PASSWORD_ANCHORS, folded=True)
    anchored = _anchored_matches(_LOOSE_PASSWORD, text, starts)
    assert [m.span() for m in anchored] == [m.span() for m in _LOOSE_PASSWORD.finditer(text)]


# --- read_indexable ------------------------------------------------------------------------


def test_text_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "app.py"
    path.write_bytes(codecs.BOM_UTF8 + b"def main():\n    return 0\n")
    assert read_indexable(path, max_file_bytes=1000) == ("def main():\n    return 0\n", None)


def test_utf16_file_is_read_as_text(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(codecs.BOM_UTF16_LE + "naïve notes\n".encode("utf-16-le"))
    assert read_indexable(path, max_file_bytes=1000) == ("naïve notes\n", None)


def test_symlink_is_never_followed(tmp_path: Path) -> None:
    target = tmp_path / "real.py"
    target.write_text("x = 1\n")
    link = tmp_path / "link.py"
    link.symlink_to(target)
    assert read_indexable(link, max_file_bytes=1000) == (None, "symlink")


def test_oversized_file_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "big.txt"
    path.write_text("a\n" * 600)
    assert read_indexable(path, max_file_bytes=1000) == (None, "oversized")
    assert read_indexable(path, max_file_bytes=1200)[1] is None


def test_directory_and_fifo_are_not_regular_files(tmp_path: Path) -> None:
    assert read_indexable(tmp_path, max_file_bytes=1000) == (None, "not a regular file")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)  # opening it for reading would block forever
    assert read_indexable(fifo, max_file_bytes=1000) == (None, "not a regular file")


def test_missing_file_is_unreadable_not_an_exception(tmp_path: Path) -> None:
    assert read_indexable(tmp_path / "gone.py", max_file_bytes=1000) == (
        None,
        "unreadable: ENOENT",
    )


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files regardless of permissions")
def test_permission_denied_is_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "locked.py"
    path.write_text("x = 1\n")
    path.chmod(0)
    assert read_indexable(path, max_file_bytes=1000) == (None, "unreadable: EACCES")


def test_binary_content_without_extension_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "program"
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4)
    assert read_indexable(path, max_file_bytes=10_000) == (None, "binary")


def test_file_with_a_secret_is_skipped_without_revealing_it(tmp_path: Path) -> None:
    path = tmp_path / "settings.py"
    path.write_text(f'DEBUG = True\nSECRET_KEY = "x"\nSTRIPE_TOKEN = "{REAL_LOOKING}"\n')
    text, reason = read_indexable(path, max_file_bytes=10_000)
    assert text is None
    assert reason == "secret: secret assignment (token)"


def test_minified_content_without_min_name_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "bundle.js"
    path.write_text("function a(){return 1};" * 300)
    assert read_indexable(path, max_file_bytes=100_000) == (None, "minified")


def test_this_file_is_indexable_itself() -> None:
    # The fakes above are assembled at run time, so the file holds no secret-shaped literal.
    assert secret_reason(Path(__file__).read_text(encoding="utf-8")) is None


# --- placeholders: one rule for provider formats and assignments ---------------------------


@pytest.mark.parametrize(
    "text",
    [
        "ANTHROPIC_API_KEY=sk" + "-ant-api03-...\n",
        "OPENAI_API_KEY=sk" + "-proj-abc123...\n",
        "OPENAI_API_KEY=sk" + "-proj-abc123\u2026\n",
        "token = 'REPLACE" + "_ME_WITH_TOKEN'\n",
        "api_key = 'replace-" + "with-" + fake(12) + "'\n",
        "DB_PASSWORD=Your" + "Password123\n",
        "API_TOKEN=abc" + "XXX" + fake(12) + "\n",
        'secret = "<' + fake(12) + '>"\n',
    ],
)  # fmt: skip
def test_placeholders_keep_a_file_indexed(text: str) -> None:
    assert secret_reason(text) is None


@pytest.mark.parametrize(
    "text",
    [
        # random characters followed by an ellipsis: a key pasted into a log or cut short,
        # still (part of) a real key, so it counts (fail closed)
        "export ANTHROPIC_API_KEY=sk" + "-ant-api03-" + fake(40) + "...\n",
        "token: gh" + "p_" + fake(30) + "\u2026\n",
    ],
)  # fmt: skip
def test_random_key_characters_before_an_ellipsis_still_count(text: str) -> None:
    assert secret_reason(text) is not None


def test_readme_with_placeholder_keys_is_indexed(tmp_path: Path) -> None:
    path = tmp_path / "README.md"
    path.write_text(
        "# Setup\n\n```sh\nANTHROPIC_API_KEY=sk" + "-ant-api03-...\n"
        "OPENAI_API_KEY=sk" + "-proj-abc123...\n```\n\n"
        "```python\ntoken = 'REPLACE" + "_ME_WITH_TOKEN'\n```\n"
    )
    text, reason = read_indexable(path, max_file_bytes=10_000)
    assert reason is None
    assert text is not None and "REPLACE" in text


# --- credentials under other file names and formats ----------------------------------------

TROUBADOR = "Tr0ub4dor" + "Quokka"  # a password-shaped value, assembled at run time


@pytest.mark.parametrize(
    "rel_path",
    [
        "pgpass.conf",
        "AppData/postgresql/pgpass.conf",
        ".pgpass.old",
        "backup/.netrc.bak",
        "netrc",
        ".netrc.1",
        "htpasswd",
        "www/.htpasswd-old",
        "ci/deploy.git-credentials",
        ".git-credentials.orig",
        "home/.ssh/id_rsa.bak",
        "id_ed25519~",
        "config/credentials.json.old",
        ".npmrc.save",
    ],
)
def test_credential_file_backups_and_variants_are_excluded(rel_path: str) -> None:
    assert path_exclusion(rel_path) == "secret file name"


@pytest.mark.parametrize(
    "rel_path",
    [
        "Lib/netrc.py",
        "tests/test_netrc.py",
        "support/htpasswd.c",
        "docs/pgpass.md",
        "app.py.bak",
        "release-1",
        "id_rsa.pub",
        "src/credentials_form.tsx",
        "notes.old",
    ],
)
def test_source_files_named_after_credential_formats_are_kept(rel_path: str) -> None:
    assert path_exclusion(rel_path) is None


def hex_of(seed: str, length: int) -> str:
    return hashlib.sha256(seed.encode()).hexdigest() * (length // 64 + 1)


NEW_PROVIDER_KEYS = [
    ("gs" + "k_" + fake(52, salt="groq"), "Groq key"),
    ("xa" + "i-" + fake(80, salt="xai"), "xAI key"),
    ("sk" + "-or-v1-" + hex_of("openrouter", 64)[:64], "OpenRouter key"),
    ("S" + "G." + fake(22, salt="sg") + "." + fake(43, salt="grid"), "SendGrid key"),
    ("do" + "p_v1_" + hex_of("do", 64)[:64], "DigitalOcean token"),
    ("do" + "o_v1_" + hex_of("doo", 64)[:64], "DigitalOcean token"),
    ("do" + "r_v1_" + hex_of("dor", 64)[:64], "DigitalOcean token"),
    ("pp" + "lx-" + fake(48, salt="pplx"), "Perplexity key"),
    ("r" + "8_" + fake(37, salt="r8"), "Replicate token"),
    ("shp" + "at_" + hex_of("shop", 32)[:32], "Shopify token"),
]


@pytest.mark.parametrize(("value", "kind"), NEW_PROVIDER_KEYS)
@pytest.mark.parametrize("context", ["{}", "KEY={}\n", 'Client(api_key="{}")\n', "`{}`"])
def test_more_provider_key_formats_are_found(value: str, kind: str, context: str) -> None:
    reason = secret_reason(context.format(value))
    assert reason == kind
    assert value not in reason


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (f"db.internal:5432:app:appuser:{TROUBADOR}9\n", "pgpass credentials"),
        (f"# local\n*:*:*:postgres:{TROUBADOR}\n", "pgpass credentials"),
        (f"localhost:5432:app:app:pa\\:ss{TROUBADOR}\n", "pgpass credentials"),
        (f"machine api.internal.net login alice password {TROUBADOR}8\n", "netrc credentials"),
        (f"machine a.b\n  login alice\n  passwd {TROUBADOR}\n", "netrc credentials"),
        ("quokkaht:{" + "SHA}ufKssJ/Sk+WzDNhY7AGbX6lTiDY=\n", "password hash"),
        ("u:{" + "SSHA}" + base64_of("ssha", 32) + "\n", "password hash"),
        ("userPassword: {" + "SSHA512}" + base64_of("ldap", 88) + "\n", "password hash"),
        ('conn = "AccountName=acme; Account' + f'Key = {base64_of("az", 86)}=="', "Azure key"),
        ("x;account" + f"key={base64_of('lower', 86)}==;\n", "Azure key"),
        ("SharedAccess" + f"key =  {base64_of('bus', 43)}=\n", "Azure key"),
        (f"# pass: {TROUBADOR}7\n", "secret assignment (pass)"),
        (f"/* pass = {TROUBADOR} */\n", "password in comment"),
        (f"# admin password for prod: {TROUBADOR}6\n", "password in comment"),
        (f"# pw={TROUBADOR}\n", "password in comment"),
        (f"PASS={TROUBADOR}\n", "secret assignment (pass)"),
        (f"export DB_PASS={TROUBADOR}\n", "secret assignment (pass)"),
        (f"The staging password is `{TROUBADOR}`.\n", "password in text"),
        (f'The admin passphrase is "{TROUBADOR}".\n', "password in text"),
    ],
)  # fmt: skip
def test_credential_formats_and_loose_passwords_are_found(text: str, kind: str) -> None:
    reason = secret_reason(text)
    assert reason == kind
    assert TROUBADOR not in reason


@pytest.mark.parametrize(
    "text",
    [
        "localhost:5432:*:postgres:postgres\n",  # the password is the user name
        "db:5432:app:app:password123\n",  # a well-known default
        "fe80:0:0:0:200:f8ff:fe21:67cf\n",
        "00:1a:2b:3c:4d:5e\n",
        "  return x[1:2:3]\n",
        "machine learning password hashes are slow\n",
        "machine host login alice password <your-password>\n",
        "    pass\n",
        "        bypass = " + TROUBADOR + "\n",
        'passport = "' + TROUBADOR + '"\n',
        "pass_rate = 0.95\n",
        "# pass the value: foo1bar\n",
        "# passes: 12abc34\n",
        "# pwned: abc123x\n",
        "the pass is 12abc34 for all\n",
        "The password is `changeme`.\n",
        "The password is `hunter` (no digit).\n",
        "the password is " + TROUBADOR + " without quotes in prose\n",
        ";   passwd chat = *New*UNIX*password* %n\\n\n",
        "# admin password for prod: see the vault\n",
        "SG." + "x" * 22 + "." + "x" * 43 + "\n",
        "sk" + "-or-v1-" + "0" * 64 + "\n",
        "xa" + "i-" + "your" + fake(76) + "\n",
        "account" + "key=<account-key>\n",
    ],
)  # fmt: skip
def test_credential_format_lookalikes_are_not_secrets(text: str) -> None:
    assert secret_reason(text) is None


@pytest.mark.parametrize(
    "comment",
    [
        "# password: must-be-non-empty",
        "// Password is user-defined",
        "# pwd: current-working-directory",
        "# Password is read-only.",
    ],
)
def test_prose_about_passwords_in_comments_keeps_a_file_indexed(comment: str) -> None:
    """Lower-case words joined by hyphens are prose, not a password."""
    assert secret_reason(f"x = 1\n{comment}\ny = 2\n") is None


def test_keyword_rules_skip_overlong_lines_but_provider_keys_are_found_in_any_line() -> None:
    """Assignments and comment passwords are looked for in lines of at most
    HEURISTIC_LINE_CHARS characters (so the check stays linear); a provider key is found
    however long its line."""
    from ds4_core.privacy.secrets import HEURISTIC_LINE_CHARS

    padding = "a" * HEURISTIC_LINE_CHARS
    assignment = "pass" + 'word = "' + "Tr0ub4dor&3xyzzy" + '"'  # built: this file is indexed
    assert secret_reason(f"x = 1\n{assignment}\n") == "secret assignment (password)"
    assert secret_reason(f"x = 1\n{padding}; {assignment}\n") is None
    token = "ghp_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bD1fH3jL5"
    assert secret_reason(f"x = 1\n{padding}; key = '{token}'\n") == "GitHub token"


def test_an_assignment_on_a_long_line_or_in_a_cr_only_file_is_still_found() -> None:
    """The keyword rules read what the index keeps of an overlong line (its first
    MAX_LINE_CHARS characters), and lines end at CR too."""
    value = "Xk9#mQ2vLp" + "7wZZ"
    pass_word = "pass" + "word"
    record = f'{{"user":"app","{pass_word}":"{value}","blob":"' + "A" * 4100 + '"}'
    assert secret_reason("x = 1\n" * 100 + record + "\n") == "secret assignment (password)"
    cr_only = "x = 1\r" * 1000 + f'{pass_word} = "{value}"\r'
    assert secret_reason(cr_only) == "secret assignment (password)"


def test_a_real_key_is_found_even_when_followed_by_an_ellipsis_or_percent_encoded() -> None:
    """A key's random part is not a printf template (`%3d`, `%2b` in an Azure SAS signature)
    and a whole key followed by `...` in a log line is still a key."""
    signature = "abcdefABCDEF0123456789abcdefABCDEF0123" + "%2bqZk%3d"
    url = "https://acct.blob.core.windows.net/c?sv=2020-08-04&ss=b&" + "sig=" + signature
    assert secret_reason(url) == "Azure SAS signature"
    key = "gh" + "p_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bD1fH3jL5"
    assert secret_reason(f"the token {key}... was rotated") == "GitHub token"


PW = "pass" + "word"  # the keyword, assembled so that this file stays indexable


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (f'{PW} = "S3cret' + 'Pass!"', "secret assignment (password)"),  # 11 characters
        ('{"user": "capybara", "' + PW + '": "Tr0ub' + '4dor&3"}', "secret assignment (password)"),
        (f"PG{PW.upper()}=Zq8k" + "Lp2vNx7 psql -h db", "secret assignment (password)"),
        (f"docker run -e POSTGRES_{PW.upper()}=Zq8k" + "Lp2vNx7 postgres", "secret assignment (password)"),
        (f"default login me {PW} Zq8k" + "Lp2vNx7", "netrc credentials"),
        ("MIIEvQIBADANBg\n-----END PRIVATE" + " KEY-----\n", "private key"),
    ],
)  # fmt: skip
def test_short_quoted_passwords_env_prefixes_netrc_default_and_key_tails_are_found(
    text: str, reason: str
) -> None:
    assert secret_reason(f"x = 1\n{text}\n") == reason


@pytest.mark.parametrize(
    "text",
    [
        f'{PW} = "hunter"',  # too short to be sure
        f"{PW}: hunter22 is what they used",  # prose after a bare value, not `NAME=value cmd`
        f'{PW}_hash = "abcdef12"',
        f'{PW} = "my pass 1"',
    ],
)
def test_values_that_only_look_like_passwords_keep_a_file_indexed(text: str) -> None:
    assert secret_reason(f"x = 1\n{text}\n") is None


def test_netrc_default_entries_do_not_make_the_check_quadratic() -> None:
    """`default` takes no value, so a flood of `login default` pairs could make each `default`
    scan to the end of the file; the pairs before `password` are bounded. Counted, not timed:
    the number of pairs tried from one `default` stays below the cap."""
    from ds4_core.privacy.secrets import _NETRC_ENTRY

    flood = "default " + "login default " * 2_000 + "password Zq8k" + "Lp2vNx7"
    match = _NETRC_ENTRY.search(flood)
    assert match is not None and match.start() > 2_000 * 14 - 200  # only the last pairs


@pytest.mark.parametrize(
    "text",
    [
        "export PG" + PW.upper() + "=Xk9vQ2pLm7; pg_dump db",
        "environment: [POSTGRES_" + PW.upper() + "=Xk9vQ2pLm7, X=1]",
    ],
)
def test_an_environment_assignment_before_a_semicolon_or_comma_is_found(text: str) -> None:
    assert secret_reason(f"x = 1\n{text}\n") == "secret assignment (password)"
