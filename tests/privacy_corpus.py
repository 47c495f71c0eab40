"""A corpus of secrets in the shapes DS4 redacts, for the privacy tests of the core and the
LSP server (`from privacy_corpus import SECRETS, PLACEHOLDERS`).

`SECRETS`: `(kind, text, value)` triples: `text` holds the secret `value` as a user would
paste it (a shell line, a config file, a curl command, a comment), and `kind` is the kind
`redact_secrets` reports for it (`Redacted.by_kind`, the detector's reason string). After
redaction for a remote destination, `value` must occur nowhere. Every value is one line of 10
or more characters that JSON writes as it is (no quote, backslash or control character), so
it can be looked for in serialized output; for a private key it is the key's longest line.

`PLACEHOLDERS`: texts that only stand for a secret (`sk-...`, `<your key>`, `${API_KEY}`,
`password=changeme`, code that reads a secret from elsewhere): redaction leaves them as they
are, and the project index keeps files holding them.

Every value is assembled at run time from pieces, so that this file holds no token-shaped
string itself (it must stay indexable, and secret scanners must not flag it). The values are
random-looking but fake: they unlock nothing.
"""

from __future__ import annotations

import base64
import hashlib


def fake(length: int, *, salt: str = "") -> str:
    """A random-looking value of `length` characters: mixed case and digits, no words."""
    digest = hashlib.sha256(f"ds4-privacy-corpus:{salt}".encode()).digest() * (length // 32 + 1)
    chars = base64.b64encode(digest).decode().replace("+", "").replace("/", "")
    while len(chars) < length:
        chars += chars
    value = chars[:length]
    # At least a lower-case letter, an upper-case letter and a digit, whatever the digest.
    return ("a1Z" + value[3:])[:length] if length >= 3 else value


def fake_hex(length: int, *, salt: str = "") -> str:
    """`length` lower-case hex digits."""
    return hashlib.sha512(salt.encode()).hexdigest()[:length]


def pem_block(label: str, salt: str) -> tuple[str, str]:
    """A PEM private key block of `label` (`RSA`, `EC`, `OPENSSH`) and its base64 body."""
    body = (
        "MII"
        + fake(61, salt=salt)
        + "\n"
        + fake(64, salt=salt + "2")
        + "\n"
        + fake(20, salt=salt + "3")
    )
    kind = f"{label} PRIVATE" if label else "PRIVATE"
    begin = "-----BEGIN " + kind + " KEY-----"
    end = "-----END " + kind + " KEY-----"
    return f"{begin}\n{body}\n{end}\n", body


_OPENAI_PROJECT = "sk" + "-proj-" + fake(74, salt="openai") + "T3Blbk" + "FJ" + fake(74, salt="o2")
_OPENAI_LEGACY = "sk" + "-" + fake(48, salt="openai-legacy")
_ANTHROPIC = "sk" + "-ant-api03-" + fake(93, salt="anthropic") + "AA"
_GITHUB_CLASSIC = "gh" + "p_" + fake(36, salt="github")
_GITHUB_FINE = "github" + "_pat_" + "11A" + fake(19, salt="gh-fine") + "_" + fake(59, salt="gh-f2")
_GITLAB = "gl" + "pat-" + fake(20, salt="gitlab")
_SLACK = "xo" + "xb-" + "2945812" + "3410-" + "7719" + "22048136-" + fake(24, salt="slack")
_STRIPE = "sk" + "_live_" + fake(24, salt="stripe")
_GOOGLE = "AI" + "za" + "Sy" + fake(33, salt="google")
_AWS_ID = "AK" + "IA" + "Q3EGUWLZ7XMN4PRT"
_AWS_SECRET = fake(40, salt="aws-secret")
_HUGGING_FACE = "h" + "f_" + "KwPcYdQLyXUbwhXhsRUVmjpBKwPcYdQLyX"
_NPM = "np" + "m_" + fake(36, salt="npm")
_AZURE_KEY = base64.b64encode(hashlib.sha512(b"azure").digest()).decode()[:86] + "=="
_BEARER = "eyJ" + fake(40, salt="jwt") + "." + fake(30, salt="jwt2")
_PASSWORD = "Zq8k" + "Lp2vNx7"
_URL_PASSWORD = "Ur1" + fake(10, salt="url")
_API_KEY = "k3" + fake(30, salt="api-key")
_DB_PASSWORD = "pG7" + "x!rT2wq"
_NETRC_PASSWORD = "nT4" + fake(12, salt="netrc")
_PGPASS_PASSWORD = "Pg9" + fake(12, salt="pgpass")
_COMMENT_PASSWORD = "cM3" + fake(9, salt="comment")
_CONNECTION_PASSWORD = "Cs5" + fake(11, salt="connection")
_PROSE_PASSWORD = "St4" + fake(9, salt="prose")
_CLIENT_SECRET = fake(34, salt="client-secret")
_ACCESS_TOKEN = fake(32, salt="access-token")
_RSA, _RSA_BODY = pem_block("RSA", "rsa")
_EC, _EC_BODY = pem_block("EC", "ec")
_OPENSSH, _OPENSSH_BODY = pem_block("OPENSSH", "openssh")
_PKCS8, _PKCS8_BODY = pem_block("", "pkcs8")
_PW = "pass" + "word"


def _longest_line(body: str) -> str:
    return max(body.split("\n"), key=len)


SECRETS: list[tuple[str, str, str]] = [
    ("OpenAI key", f"export OPENAI_API_KEY={_OPENAI_PROJECT}\n", _OPENAI_PROJECT),
    ("OpenAI key", f'client = OpenAI(api_key="{_OPENAI_LEGACY}")\n', _OPENAI_LEGACY),
    ("Anthropic key", f"ANTHROPIC_API_KEY={_ANTHROPIC} pi --model claude\n", _ANTHROPIC),
    ("GitHub token", f"git clone https://{_GITHUB_CLASSIC}@github.com/acme/app\n", _GITHUB_CLASSIC),
    ("GitHub token", f"GH_TOKEN: {_GITHUB_FINE}\n", _GITHUB_FINE),
    (
        "GitLab token",
        f"curl --header 'PRIVATE-TOKEN: {_GITLAB}' https://gitlab.com/api/v4/user\n",
        _GITLAB,
    ),
    ("Slack token", f"SLACK_BOT_TOKEN={_SLACK}\n", _SLACK),
    ("Stripe key", f"stripe.api_key = '{_STRIPE}'\n", _STRIPE),
    (
        "Google API key",
        f"https://maps.googleapis.com/maps/api/geocode/json?key={_GOOGLE}\n",
        _GOOGLE,
    ),
    ("AWS access key id", f"aws_access_key_id = {_AWS_ID}\n", _AWS_ID),
    ("secret assignment (secret)", f"aws_secret_access_key = {_AWS_SECRET}\n", _AWS_SECRET),
    ("Hugging Face token", f"huggingface-cli login --token {_HUGGING_FACE}\n", _HUGGING_FACE),
    ("npm token", f"//registry.npmjs.org/:_authToken={_NPM}\n", _NPM),
    (
        "Azure key",
        "DefaultEndpointsProtocol=https;AccountName=shop;Account" + f"Key={_AZURE_KEY};\n",
        _AZURE_KEY,
    ),
    ("private key", f"here is the deploy key:\n{_RSA}thanks\n", _longest_line(_RSA_BODY)),
    ("private key", f"```\n{_EC}```\n", _longest_line(_EC_BODY)),
    ("private key", f"cat ~/.ssh/id_ed25519\n{_OPENSSH}", _longest_line(_OPENSSH_BODY)),
    ("private key", f'"private_key": "{_PKCS8}"', _longest_line(_PKCS8_BODY)),
    (
        "bearer token",
        f'curl -H "Authorization: Bearer {_BEARER}" https://api.example.org/v1/me\n',
        _BEARER,
    ),
    ("secret assignment (password)", f"{_PW}={_PASSWORD}\n", _PASSWORD),
    ("secret assignment (password)", f'{_PW}: "{_DB_PASSWORD}"\n', _DB_PASSWORD),
    ("secret assignment (api_key)", f'api_key: "{_API_KEY}"\n', _API_KEY),
    ("secret assignment (client_secret)", f"CLIENT_SECRET={_CLIENT_SECRET}\n", _CLIENT_SECRET),
    ("secret assignment (access_token)", f"access_token: {_ACCESS_TOKEN}\n", _ACCESS_TOKEN),
    (
        "credentials in URL",
        f"DATABASE_URL=postgres://shop:{_URL_PASSWORD}@db.internal:5432/shop\n",
        _URL_PASSWORD,
    ),
    (
        "netrc credentials",
        f"machine api.shop.internal login deploy {_PW} {_NETRC_PASSWORD}\n",
        _NETRC_PASSWORD,
    ),
    ("pgpass credentials", f"db.internal:5432:shop:deploy:{_PGPASS_PASSWORD}\n", _PGPASS_PASSWORD),
    ("password in comment", f"# admin {_PW} for prod: {_COMMENT_PASSWORD}\n", _COMMENT_PASSWORD),
    (
        "credentials in connection string",
        f"Server=db;Database=shop;User Id=app;Pwd={_CONNECTION_PASSWORD};\n",
        _CONNECTION_PASSWORD,
    ),
    (
        "password in text",
        f"the staging {_PW} is `{_PROSE_PASSWORD}`, keep it safe\n",
        _PROSE_PASSWORD,
    ),
]
"""Every supported secret shape: `(kind, text, value)`."""

PLACEHOLDERS: list[str] = [
    "OPENAI_API_KEY=sk-...\n",
    "export ANTHROPIC_API_KEY=sk-ant-api03-...\n",
    "api_key = <your key>\n",
    "api_key: ${API_KEY}\n",
    f"{_PW}=changeme\n",
    'api_key = "YOUR_API_KEY"\n',
    "Authorization: Bearer <token>\n",
    "Authorization: Bearer $TOKEN\n",
    "aws_access_key_id = AK" + "IAIOSFODNN7EXAMPLE\n",
    "GITHUB_TOKEN=gh" + "p_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n",
    f'{_PW} = os.environ["DB_PASSWORD"]\n',
    f"def login(user: str, {_PW}: str | None = None) -> bool:\n",
    f"{_PW} = settings.{_PW}\n",
    "token = get_token()\n",
    "the Bearer authentication scheme\n",
    f"postgres://user:{_PW}@localhost/db\n",
]
"""Texts that stand for a secret without holding one: never redacted."""
