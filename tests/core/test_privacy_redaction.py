"""`privacy.redaction.redact_secrets`: secret redaction for remote destinations, in the order
of docs/reference.md §3.8, then every span of the shared detector (docs/privacy.md).

Invariants: the index filter never flags redacted text (`secret_reason(...) is None`), no
secret value survives, redaction is idempotent, placeholders and secret-free text are left as
they are. Fake credentials come from tests/privacy_corpus.py (assembled at run time).
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from privacy_corpus import PLACEHOLDERS, SECRETS, fake, pem_block

from ds4_core.privacy import redaction
from ds4_core.privacy.redaction import (
    CREDENTIAL_MARKER,
    MIN_ECHOED_CHARS,
    PRIVATE_KEY_MARKER,
    SECRET_MARKER,
    TOKEN_MARKER,
    Redacted,
    redact_secrets,
)
from ds4_core.privacy.secrets import (
    HEURISTIC_LINE_CHARS,
    may_hold_secret,
    secret_reason,
    secret_spans,
)

PW = "pass" + "word"


@pytest.mark.parametrize(("kind", "text", "value"), SECRETS, ids=[k for k, _, _ in SECRETS])
def test_every_corpus_secret_is_redacted(kind: str, text: str, value: str) -> None:
    redacted = redact_secrets(text)
    assert value not in redacted.text
    assert redacted.by_kind.get(kind, 0) >= 1
    assert redacted.count == sum(redacted.by_kind.values())
    assert all(value not in name for name in redacted.by_kind)
    assert secret_reason(redacted.text) is None
    assert redact_secrets(redacted.text) == Redacted(redacted.text, 0, {})


def test_corpus_values_can_be_looked_for_in_serialized_output() -> None:
    for _, text, value in SECRETS:
        assert len(value) >= 10 and json.dumps(value) == f'"{value}"' and value in text
    assert len({value for _, _, value in SECRETS}) == len(SECRETS)


def test_the_whole_corpus_in_one_text_leaves_no_secret() -> None:
    text = "".join(text for _, text, _ in SECRETS)
    redacted = redact_secrets(text)
    assert [value for _, _, value in SECRETS if value in redacted.text] == []
    assert redacted.count >= len(SECRETS)
    assert secret_reason(redacted.text) is None


@pytest.mark.parametrize("text", PLACEHOLDERS)
def test_placeholders_are_not_redacted(text: str) -> None:
    assert redact_secrets(text) == Redacted(text, 0, {})


@pytest.mark.parametrize(
    ("text", "expected", "kind"),
    [
        # 2. The reference's key shapes, beside the detector's formats.
        ("use sk-" + "abc12345xyz now", f"use {CREDENTIAL_MARKER} now", "OpenAI key"),
        ("sk-ant-" + "K3y12345678", CREDENTIAL_MARKER, "Anthropic key"),
        ("gh" + "s_" + "a1b2c3d4e5f6g7", CREDENTIAL_MARKER, "GitHub token"),
        ("id=AK" + "IAQ3EGUWLZ7XMN4PRT;", f"id={CREDENTIAL_MARKER};", "AWS access key id"),
        ("xo" + "xb-" + "1234567890-" + fake(24), CREDENTIAL_MARKER, "Slack token"),
        ("gl" + "pat-" + fake(20), CREDENTIAL_MARKER, "GitLab token"),
        ("AI" + "za" + fake(35), CREDENTIAL_MARKER, "Google API key"),
        ("k = sk" + "_live_" + fake(24), f"k = {CREDENTIAL_MARKER}", "Stripe key"),
        # 3. Bearer: 8 or more token characters (a letter and a digit), the keyword kept.
        ("Authorization: Bearer abcd1234", f"Authorization: Bearer {TOKEN_MARKER}", "bearer token"),
        ("-H 'authorization: bearer " + fake(40) + "'", f"-H 'authorization: bearer {TOKEN_MARKER}'", "bearer token"),
        # 4. The reference's assignments: the value alone becomes the marker, the key,
        # separator and quotes kept as written (not the reference's `<key>=` form).
        (f'{PW}: "hunter22"', f'{PW}: "{SECRET_MARKER}"', f"secret assignment ({PW})"),
        (f"{PW} = 'c0rrect horse'", f"{PW} = '{SECRET_MARKER}'", f"secret assignment ({PW})"),
        ('"api_key": "k3y!"', f'"api_key": "{SECRET_MARKER}"', "secret assignment (api_key)"),
        ('{"apiKey": "AbCdEf' + '123456GhIjKl"}', f'{{"apiKey": "{SECRET_MARKER}"}}', "secret assignment (apikey)"),
        (f"{PW}: Zq8kLp2vNx7", f"{PW}: {SECRET_MARKER}", f"secret assignment ({PW})"),
        (f"{PW}=Zq8kLp2vNx7", f"{PW}={SECRET_MARKER}", f"secret assignment ({PW})"),
        (f"DB_{PW.upper()}=s3cr3t-v4lue", f"DB_{PW.upper()}={SECRET_MARKER}", f"secret assignment ({PW})"),
        ("apikey=abcd;x=1", f"apikey={SECRET_MARKER};x=1", "secret assignment (apikey)"),
        ("access_token: abcd", f"access_token: {SECRET_MARKER}", "secret assignment (access_token)"),
        (f"{{user: bob, {PW}: hunter22, x: 1}}", f"{{user: bob, {PW}: {SECRET_MARKER}, x: 1}}", f"secret assignment ({PW})"),
        ("AUTH_TOKEN := `t0k3n`", f"AUTH_TOKEN := `{SECRET_MARKER}`", "secret assignment (auth_token)"),
        ("client_secret => 'cl13nt'", f"client_secret => '{SECRET_MARKER}'", "secret assignment (client_secret)"),
        # 5. The detector's other spans.
        ("mysql://root:" + "Xk9vQ2pLm7@db.internal/x", f"mysql://root:{SECRET_MARKER}@db.internal/x", "credentials in URL"),
        (f"# the admin {PW} for prod: Zq8kLp2v!", f"# the admin {PW} for prod: {SECRET_MARKER}", "password in comment"),
        (f"SECRET_KEY = '{fake(40)}'", f"SECRET_KEY = '{SECRET_MARKER}'", "secret assignment (secret)"),
    ],
)  # fmt: skip
def test_exact_output_forms(text: str, expected: str, kind: str) -> None:
    assert redact_secrets(text) == Redacted(expected, 1, {kind: 1})


def test_a_private_key_block_becomes_one_marker() -> None:
    block, body = pem_block("RSA", "exact")
    redacted = redact_secrets(f"key:\n{block}done\n")
    assert redacted == Redacted(f"key:\n{PRIVATE_KEY_MARKER}\ndone\n", 1, {"private key": 1})


@pytest.mark.parametrize("label", ["RSA", "EC", "OPENSSH", "DSA", "ENCRYPTED", ""])
def test_every_private_key_label_is_redacted(label: str) -> None:
    block, body = pem_block(label, label)
    redacted = redact_secrets(block)
    assert redacted.text == PRIVATE_KEY_MARKER + "\n"
    assert body not in redacted.text


def test_a_private_key_cut_short_is_redacted_to_the_end() -> None:
    block, body = pem_block("RSA", "short")
    text = "pasted:\n" + block[: block.index("-----END")]
    assert redact_secrets(text).text == "pasted:\n" + PRIVATE_KEY_MARKER


def test_the_reference_order_a_key_in_an_assignment_is_a_credential() -> None:
    """Step 2 (keys) runs before step 4 (assignments): the key is counted once, as a key."""
    key = "sk" + "-proj-" + fake(60)
    text = f'api_key = "{key}"\nAuthorization: Bearer {key}\n'
    redacted = redact_secrets(text)
    assert redacted.text == (
        f'api_key = "{CREDENTIAL_MARKER}"\nAuthorization: Bearer {CREDENTIAL_MARKER}\n'
    )
    assert redacted.by_kind == {"OpenAI key": 2}


def test_a_secret_value_is_also_replaced_where_it_occurs_again() -> None:
    value = fake(12, salt="echo")
    text = f"{PW}={value}\nI typed {value} in the login form\n"
    redacted = redact_secrets(text)
    assert redacted.text == f"{PW}={SECRET_MARKER}\nI typed {SECRET_MARKER} in the login form\n"
    assert redacted.by_kind == {f"secret assignment ({PW})": 2}


def test_a_keyword_used_as_a_value_does_not_hide_the_next_secret() -> None:
    value = fake(10, salt="hide")
    redacted = redact_secrets(f'{PW}: {PW}: "{value}"\n')
    assert value not in redacted.text
    assert secret_reason(redacted.text) is None


def test_a_text_still_changing_after_the_last_pass_is_withheld_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Fail closed: if the passes run out before the text stops changing, nothing of it is
    sent (counted as `unresolved`)."""
    monkeypatch.setattr(redaction, "MAX_PASSES", 0)
    _, text, _ = SECRETS[0]
    assert redact_secrets(text) == Redacted(SECRET_MARKER, 1, {"unresolved": 1})
    assert redact_secrets("the right thought\n") == Redacted("the right thought\n", 0, {})


def test_counts_by_kind() -> None:
    text = (
        f"{PW}=Zq8kLp2vNx7\n"
        f"token: {fake(24)}\n"
        "Bearer " + fake(30) + "\n"
        "Bearer " + fake(30, salt="2") + "\n"
        "gh" + "p_" + fake(36) + "\n"
    )
    redacted = redact_secrets(text)
    assert redacted.by_kind == {
        f"secret assignment ({PW})": 1,
        "secret assignment (token)": 1,
        "bearer token": 2,
        "GitHub token": 1,
    }
    assert redacted.count == 5


@pytest.mark.parametrize(
    "text",
    [
        "",
        "def main():\n    return 0\n",
        "the right thought; Bearer authentication; a password is required\n",
        f"def login(user, {PW}=None):\n    {PW} = self.{PW}\n    api_key = os.getenv('K')\n",
        f"{PW}: Optional[str] = None\n",
        f"{PW} = get_{PW}()\n",
        f"def load(data: bytes, {PW}: bytes, api_key: SecretStr = None) -> Key:\n",
        f"def load({PW}: Optional[bytes]) -> None: ...\n",
        'KEY_TYPES = (b"sk-ssh-ed25519@openssh.com", b"sk-ecdsa-sha2-nistp256@openssh.com")\n',
        "LOCALES = {'sk-x-altquot': 1}\n",
    ],
)
def test_text_without_secrets_comes_back_unchanged(text: str) -> None:
    assert redact_secrets(text) == Redacted(text, 0, {})


@pytest.mark.parametrize(
    "anchor", ["sk-", "gh", "AKIA", "BEARER", "Api_Key", "APIKEY", "access_token", "Auth_Token",
               "client_secret", "PASSWORD", "-----BEGIN ", "-----END "],
)  # fmt: skip
def test_every_redaction_pattern_anchor_defeats_the_fast_path(anchor: str) -> None:
    assert may_hold_secret(f"x {anchor} y")


def test_text_without_anchors_is_returned_as_is() -> None:
    text = "Hello, world. 1 + 1 = 2\n" * 1000
    assert redact_secrets(text).text is text


def test_a_value_cut_at_the_line_bound_is_redacted_whole() -> None:
    value = fake(90, salt="bound")
    text = " " * (HEURISTIC_LINE_CHARS - 40) + f"token = {value} and more\n"
    redacted = redact_secrets(text)
    assert value not in redacted.text and value[-20:] not in redacted.text
    assert secret_reason(redacted.text) is None


@pytest.mark.parametrize(
    "text",
    [
        "\x00" * 100_000,
        "\ud800" * 100_000,
        (f"{PW}=" + "\ud800abc123\x00") * 20_000,
        ("Bearer " + fake(30) + "\n") * 20_000,
        ("gh" + "p_") * 200_000,
        (f"# {PW}: " * 600 + "\n") * 100,
    ],
    ids=["nul", "surrogates", "surrogate-values", "many-bearers", "many-anchors", "keyword-flood"],
)
def test_hostile_input_does_not_crash(text: str) -> None:
    redacted = redact_secrets(text)
    assert secret_reason(redacted.text) is None
    assert redact_secrets(redacted.text).text == redacted.text


_FRAGMENTS = [
    *(text for _, text, _ in SECRETS),
    *PLACEHOLDERS,
    f"{PW}=",
    f"{PW}: ",
    f"{PW} is ",
    "api_key=",
    "client_secret: ",
    "Bearer ",
    "://u:",
    "@h.internal",
    "machine h login u ",
    ":5432:db:u:",
    "-----BEGIN " + "RSA PRIVATE KEY-----",
    "-----END " + "RSA PRIVATE KEY-----",
    "sk-",
    "sk-ant-",
    "gh" + "p_",
    "AK" + "IA",
    "# ",
    "'",
    '"',
    "`",
    ";",
    ":",
    "=",
    "\n",
    "\r\n",
    "\x00",
    "\ud800",
    "ſ",
    SECRET_MARKER,
    CREDENTIAL_MARKER,
    fake(8, salt="a"),
    fake(24, salt="b"),
    "Xk9vQ2pLm7",
]
_TEXTS = st.lists(st.one_of(st.sampled_from(_FRAGMENTS), st.text(max_size=10)), max_size=14).map(
    "".join
)


@settings(max_examples=500, deadline=None)
@given(text=_TEXTS)
@example(text=f"{PW}=abcd:{fake(20)}")
@example(text=f"{PW}=[DS4 REDACTED SECRET]: {fake(20)}")
@example(text=f"SECRET: {PW}={fake(12)}")
@example(text=f'{PW}: {PW}: "{fake(10)}"\n')
@example(text=f"machine h login u {PW} {fake(15)}\nsk-machine h login u {PW} {fake(15)}\n")
def test_redacted_text_is_never_flagged_and_redaction_is_idempotent(text: str) -> None:
    redacted = redact_secrets(text)
    assert secret_reason(redacted.text) is None
    assert secret_spans(redacted.text) == []
    assert redact_secrets(redacted.text) == Redacted(redacted.text, 0, {})
    assert redacted.count == sum(redacted.by_kind.values())
    if redacted.count == 0:
        assert redacted.text == text
    if not may_hold_secret(text):  # the fast path skips nothing the steps would find
        assert redaction._redaction_pass(text, Counter(), {}) == text
    for span in secret_spans(text):
        value = text[span.start : span.end]
        # Shorter values are replaced where found, but may occur elsewhere by chance.
        assert len(value) < MIN_ECHOED_CHARS or value not in redacted.text


def test_code_that_computes_a_key_is_not_a_secret() -> None:
    for text in (
        "const apiKey = await getApiKeyForModel(currentModel);",
        "password = new PasswordField(form)",
        "api_key = yield from vault.read()",
    ):
        assert redact_secrets(text).text == text, text
    assert "hunter2xyz" not in redact_secrets("password=hunter2xyz and more words").text


# Redaction is stricter than the index filter: a miss is a leak, a little too much is cheap.


@pytest.mark.parametrize(
    "text",
    [
        f"{PW}=changeme\n",
        "api_key = <your key>\n",
        "api_key: ${API_KEY}\n",
        f"{PW}: $DB_PASSWORD\n",
        'token: "{{token}}"\n',
        "OPENAI_API_KEY=sk-...\n",
        f"{PW} = 'hunter...'\n",
        f"{PW}=xxxxxxxxxxxx\n",
        "api_key = 'xxxx-xxxx-xxxx'\n",
        f"{PW}: ********\n",
        f"{PW}=aaaaaaaa\n",
        "api_key = your_api_key\n",
        'api_key = "YOUR_TOKEN"\n',
        f"{PW}: example\n",
        f"{PW}=placeholder\n",
        f"{PW}: redacted\n",
        f"{PW}=dummy\n",
        f"{PW}: {SECRET_MARKER}\n",
    ],
)
def test_a_whole_value_placeholder_is_not_redacted(text: str) -> None:
    assert redact_secrets(text) == Redacted(text, 0, {})


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (f"{PW}=MyExamplePass2024!\n", "MyExamplePass2024!"),
        (f"{PW}: Dummy_Pa55w0rd!\n", "Dummy_Pa55w0rd!"),
        (f"DB_{PW.upper()}=changeme-R7x9q2LmP\n", "changeme-R7x9q2LmP"),
        (f"{PW}=your_{PW}_here_123Xy\n", f"your_{PW}_here_123Xy"),
        ('api_key = "sk-abcExample123x"\n', "abcExample123x"),
        (f'{PW} = "xxxx9f8e7d6c"\n', "9f8e7d6c"),
    ],
)
def test_a_value_that_merely_contains_a_placeholder_word_is_redacted(text: str, value: str) -> None:
    redacted = redact_secrets(text)
    assert value not in redacted.text
    assert redacted.count == 1
    assert secret_reason(redacted.text) is None


def test_a_url_password_is_redacted_even_with_an_example_host() -> None:
    text = "postgres://admin:S3cr3tPa55@db.example.com/app\n"
    assert secret_reason(text) is None  # the index keeps the file (documentation host)
    redacted = redact_secrets(text)
    assert redacted == Redacted(
        f"postgres://admin:{SECRET_MARKER}@db.example.com/app\n", 1, {"credentials in URL": 1}
    )
    for kept in (f"postgres://user:{PW}@localhost/db\n", "redis://u:${REDIS_PASS}@h.example.com\n"):
        assert redact_secrets(kept).count == 0, kept


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f'{PW}="ab\'cdef123Q"\n', f'{PW}="{SECRET_MARKER}"\n'),
        (f"{PW}='say \"hi\" 9x'\n", f"{PW}='{SECRET_MARKER}'\n"),
        (f'"{PW}": "p@ss \\"w0rd\\" x"\n', f'"{PW}": "{SECRET_MARKER}"\n'),
    ],
)
def test_a_quoted_value_runs_to_the_same_quote(text: str, expected: str) -> None:
    assert redact_secrets(text).text == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"{PW}: correct horse battery staple\n", f"{PW}: {SECRET_MARKER}\n"),
        (f"{PW} = hunter two three\n", f"{PW} = {SECRET_MARKER}\n"),
        (
            "passphrase: open the pod bay doors; user=hal\n",
            f"passphrase: {SECRET_MARKER}; user=hal\n",
        ),
        ("DB_PASSWD = blue moon rising, port=5432\n", f"DB_PASSWD = {SECRET_MARKER}, port=5432\n"),
        (f"my {PW} is hunter2hunter2\n", f"my {PW} is {SECRET_MARKER}\n"),
    ],
)
def test_an_unquoted_passphrase_is_redacted_whole(text: str, expected: str) -> None:
    redacted = redact_secrets(text)
    assert redacted.text == expected
    assert redacted.count == 1


@pytest.mark.parametrize(
    "text",
    [
        f"{PW} = get_{PW}()\n",
        f"{PW} = None\n",
        f"{PW} = await vault.read()\n",
        f"def f(user: str, {PW}: str, x: int) -> None:\n",
        f"{PW}: str,\n",
        f"{PW} = user.{PW} or default\n",
        f"{PW} = None  # set later\n",
        f"{PW}: str | None = None\n",
        f"the {PW} is required\n",
        f"{PW} = {PW}2\n",
        f"{PW} = db_{PW}_v2\n",
    ],
)
def test_code_after_a_password_key_is_not_redacted(text: str) -> None:
    assert redact_secrets(text) == Redacted(text, 0, {})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: Bearer abcdefghijklmnop\n", f"Authorization: Bearer {TOKEN_MARKER}\n"),
        ('{"Authorization": "Bearer ' + 'abcdefghijkl.mnopqrst"}', f'{{"Authorization": "Bearer {TOKEN_MARKER}"}}'),
        ("curl -H 'Bearer abcdefghijklmnop' https://api\n", f"curl -H 'Bearer {TOKEN_MARKER}' https://api\n"),
        ("token is Bearer abc123def456\n", f"token is Bearer {TOKEN_MARKER}\n"),
    ],
)  # fmt: skip
def test_bearer_tokens(text: str, expected: str) -> None:
    assert redact_secrets(text) == Redacted(expected, 1, {"bearer token": 1})


@pytest.mark.parametrize(
    "text",
    [
        "Use Bearer authentication for the API.\n",
        "Bearer tokens expire after an hour.\n",
        "the Bearer authentication scheme\n",
        "Authorization: Bearer <token>\n",
        "Authorization: Bearer YOUR_TOKEN_HERE\n",
        "Authorization: Bearer xxxxxxxxxxxxxxxx\n",
    ],
)
def test_bearer_prose_and_placeholders_are_kept(text: str) -> None:
    assert redact_secrets(text) == Redacted(text, 0, {})


def test_a_secret_found_by_two_rules_counts_once() -> None:
    redacted = redact_secrets("Password: Tr0ub4dor&3\n")
    assert redacted == Redacted(f"Password: {SECRET_MARKER}\n", 1, {f"secret assignment ({PW})": 1})


_JSON_VALUES = st.one_of(
    st.sampled_from([text for _, text, _ in SECRETS]),
    st.sampled_from(_FRAGMENTS),
    _TEXTS,
    st.integers(),
    st.none(),
)
_JSON_KEYS = st.sampled_from(["apiKey", PW, "note", "Authorization", "url", "output", "k"])
_JSON = st.recursive(
    _JSON_VALUES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_JSON_KEYS, inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(document=_JSON, ascii_only=st.booleans(), indent=st.sampled_from([None, 2]))
@example(document={PW: 'x="hunter22abc"', "k": "-----BEGIN " + "PRIVATE KEY-----\nMIIabc"}, ascii_only=True, indent=None)  # fmt: skip
@example(document={"note": f"{PW}=abc12345\\", "apiKey": "\u00e9" + fake(20)}, ascii_only=True, indent=None)  # fmt: skip
@example(document=[f"{PW}=", 12345678, "x"], ascii_only=True, indent=None)
@example(document=[[{"note": f"{PW}="}], [], [], "export X=abc\n"], ascii_only=True, indent=None)
@example(document={"api" + "Key": ",\x07abc"}, ascii_only=False, indent=None)
@example(document="machine h login u " + PW + " nT4a1Z6mQsyA41D\n", ascii_only=True, indent=None)
def test_a_json_document_stays_valid_json(
    document: object, ascii_only: bool, indent: int | None
) -> None:
    text = json.dumps(document, ensure_ascii=ascii_only, indent=indent)
    redacted = redact_secrets(text)
    json.loads(redacted.text)
    assert secret_reason(redacted.text) is None


def test_a_json_document_of_corpus_secrets_keeps_no_one_line_secret() -> None:
    document = {"items": [{"apiKey": value, "note": text} for _, text, value in SECRETS]}
    redacted = redact_secrets(json.dumps(document))
    assert json.loads(redacted.text)["items"]
    assert [value for _, _, value in SECRETS if value in redacted.text] == []


def test_no_privacy_module_imports_another_modules_private_names() -> None:
    import ast
    from pathlib import Path

    package = Path(redaction.__file__).parent
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                private = [alias.name for alias in node.names if alias.name.startswith("_")]
                assert private == [], (path.name, node.module, private)
