"""`privacy.secrets.secret_spans`: where the shared detector's secrets are (docs/privacy.md).

The spans follow `secret_reason`'s rules exactly: `secret_spans(t) == []` exactly when
`secret_reason(t)` is None. Fake credentials are assembled at run time (tests/privacy_corpus.py)
so that this file holds no token-shaped string.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from privacy_corpus import PLACEHOLDERS, SECRETS, fake, pem_block

from ds4_core.privacy.secrets import (
    HEURISTIC_LINE_CHARS,
    SecretSpan,
    may_hold_secret,
    secret_reason,
    secret_spans,
)
from ds4_core.project.filters import MAX_LINE_CHARS

PW = "pass" + "word"
ROOT = Path(__file__).resolve().parents[2]


def covered(text: str, value: str) -> bool:
    """Whether one span of `text` covers every occurrence of `value`."""
    spans = secret_spans(text)
    start = text.find(value)
    assert start >= 0
    while start >= 0:
        if not any(s.start <= start and start + len(value) <= s.end for s in spans):
            return False
        start = text.find(value, start + 1)
    return True


@pytest.mark.parametrize(("kind", "text", "value"), SECRETS, ids=[k for k, _, _ in SECRETS])
def test_every_corpus_secret_is_inside_a_span(kind: str, text: str, value: str) -> None:
    assert secret_reason(text) is not None
    assert covered(text, value)
    assert all(value not in span.kind for span in secret_spans(text))


@pytest.mark.parametrize("text", PLACEHOLDERS)
def test_placeholders_have_no_span(text: str) -> None:
    assert secret_reason(text) is None
    assert secret_spans(text) == []


@pytest.mark.parametrize(
    ("text", "secret", "kind"),
    [
        # Provider keys: the whole key, also where a lookbehind holds its first characters.
        ("key: sk" + "_live_" + fake(24) + "\n", "sk" + "_live_" + fake(24), "Stripe key"),
        ("do" + "p_v1_" + "ab12" * 16 + " x", "do" + "p_v1_" + "ab12" * 16, "DigitalOcean token"),
        ("s = 'ab" + "c8Q~" + fake(34, salt="q") + "'", "ab" + "c8Q~" + fake(34, salt="q"), "Azure client secret"),
        ("root:" + "$6$" + "salt1234$" + fake(40) + ":19700:0", "$6$" + "salt1234$" + fake(40), "password hash"),
        # A field name is not the key: the value after it is.
        ("AccountName=a;Account" + "Key=" + fake(40) + "==;x", fake(40) + "==", "Azure key"),
        # Values: inside quotes, the password of a URL, the value of a netrc entry.
        (f'{PW} = "{fake(14)}"\n', fake(14), "secret assignment (password)"),
        (f"DB_{PW.upper()}={fake(12)}\n", fake(12), "secret assignment (password)"),
        ("redis://:" + fake(12) + "@cache.internal:6379/0", fake(12), "credentials in URL"),
        (f"machine h.internal login me {PW} {fake(10)}\n", fake(10), "netrc credentials"),
        (f"h.internal:5432:db:me:{fake(10)}\n", fake(10), "pgpass credentials"),
        ("Authorization: Bear" + "er " + fake(30) + "\n", fake(30), "bearer token"),
        (f"# {PW}: {fake(9)} */\n", fake(9), "password in comment"),
        (f"Server=db;{PW.title()}={fake(9)};x=1\n", fake(9), "credentials in connection string"),
        (f"the {PW} is '{fake(9)}'\n", fake(9), "password in text"),
    ],
)  # fmt: skip
def test_a_span_is_exactly_the_secret(text: str, secret: str, kind: str) -> None:
    start = text.index(secret)
    assert secret_spans(text) == [SecretSpan(start, start + len(secret), kind)]


def test_a_private_key_span_is_the_whole_block() -> None:
    block, _body = pem_block("RSA", "block")
    text = f"before\n{block}after\n"
    start = text.index("-----BEGIN")
    end = text.index("KEY-----", text.index("-----END")) + len("KEY-----")
    assert secret_spans(text) == [SecretSpan(start, end, "private key")]


def test_a_private_key_without_its_end_runs_to_the_end_of_the_text() -> None:
    block, _body = pem_block("EC", "cut")
    text = "key:\n" + block[: block.index("-----END")]
    assert secret_spans(text) == [SecretSpan(5, len(text), "private key")]


def test_an_end_line_alone_is_its_own_span() -> None:
    block, body = pem_block("OPENSSH", "tail")
    end_line = block[block.index("-----END") :].rstrip("\n")
    text = f"{body[-20:]}\n{end_line}\nmore\n"
    start = text.index(end_line)
    assert secret_spans(text) == [SecretSpan(start, start + len(end_line), "private key")]


def test_two_blocks_give_two_spans() -> None:
    first, _ = pem_block("RSA", "one")
    second, _ = pem_block("EC", "two")
    text = first + "between\n" + second
    spans = secret_spans(text)
    assert [text[s.start : s.end] for s in spans] == [first.rstrip("\n"), second.rstrip("\n")]


def test_overlapping_signals_give_one_span() -> None:
    """A key in an assignment is found by two rules; the spans merge into one."""
    key = "gh" + "p_" + fake(36)
    text = f'GITHUB_TOKEN = "{key}"\n'
    start = text.index(key)
    assert secret_spans(text) == [SecretSpan(start, start + len(key), "GitHub token")]


def test_spans_are_offsets_into_the_original_text_past_a_long_line() -> None:
    """The assignment rules read the first `HEURISTIC_LINE_CHARS` characters of each line of a
    text with an overlong line; the spans still point into the text itself (CRLF included)."""
    value = fake(14, salt="long")
    long_line = f'{PW} = "{value}"  ' + "y" * (HEURISTIC_LINE_CHARS + 100)
    text = "a = 1\r\nb = 2\r\n" + long_line + "\r\n" + f"token = '{fake(20)}'\r\n"
    spans = secret_spans(text)
    assert [text[s.start : s.end] for s in spans] == [value, fake(20)]


def test_a_value_reaching_the_line_cut_is_covered_to_its_end() -> None:
    value = fake(60, salt="cut")
    prefix = " " * (HEURISTIC_LINE_CHARS - 30) + f"{PW}="
    text = f"x = 1\n{prefix}{value} tail\n"
    assert secret_reason(text) == "secret assignment (password)"
    start = text.index(value)
    assert secret_spans(text) == [
        SecretSpan(start, start + len(value), "secret assignment (password)")
    ]


def test_an_assignment_past_the_line_cut_is_neither_a_reason_nor_a_span() -> None:
    text = "x" * (HEURISTIC_LINE_CHARS + 1) + f"; {PW} = '{fake(14)}'\n"
    assert secret_reason(text) is None
    assert secret_spans(text) == []


def test_the_line_cut_is_the_index_line_cut() -> None:
    assert HEURISTIC_LINE_CHARS == MAX_LINE_CHARS == 5000


def test_text_without_any_anchor_may_not_hold_a_secret() -> None:
    assert not may_hold_secret("Hello, world. 1 + 1 = 2\n")
    assert may_hold_secret(f"the {PW.upper()} here")
    assert may_hold_secret("ſecret")  # case-folds to an anchor, as the patterns match it


_FRAGMENTS = [
    *(text for _, text, _ in SECRETS),
    *PLACEHOLDERS,
    f"{PW}=",
    f"{PW} is ",
    "Bearer ",
    "://u:",
    "@host",
    "machine h ",
    ":5432:",
    "-----BEGIN " + "RSA PRIVATE KEY-----",
    "-----END " + "RSA PRIVATE KEY-----",
    "sk-",
    "gh" + "p_",
    "# ",
    "'",
    '"',
    ";",
    "\n",
    "\r\n",
    "\r",
    "\x00",
    "\ud800",
    "ſ",
    "İ",
    "x" * 40,
    fake(16, salt="frag"),
]
_TEXTS = st.lists(st.one_of(st.sampled_from(_FRAGMENTS), st.text(max_size=12)), max_size=12).map(
    "".join
)


@settings(max_examples=400, deadline=None)
@given(text=_TEXTS)
@example(text="x" * (HEURISTIC_LINE_CHARS - 3) + f"{PW}={fake(12)}\r\n{PW}={fake(12)}")
@example(text=f"{PW}=" + "\ud800" + fake(10))
def test_spans_are_empty_exactly_when_there_is_no_reason(text: str) -> None:
    spans = secret_spans(text)
    assert (secret_reason(text) is None) == (spans == [])
    assert all(0 <= s.start < s.end <= len(text) for s in spans)
    assert all(a.end <= b.start for a, b in zip(spans, spans[1:], strict=False))
    if not may_hold_secret(text):
        assert spans == []


def test_hostile_texts_do_not_crash() -> None:
    for text in ["\x00" * 10_000, "\ud800\udfff" * 5_000, (f"{PW}=" + "\ud800") * 10_000]:
        assert secret_spans(text) == [] or secret_reason(text) is not None
    flood = (f"# {PW}: " * (HEURISTIC_LINE_CHARS // 12) + "\n") * 100
    assert (secret_spans(flood) == []) == (secret_reason(flood) is None)


@pytest.mark.parametrize(
    "path",
    [
        Path(__file__),
        Path(__file__).with_name("test_privacy_redaction.py"),
        Path(__file__).parents[1] / "privacy_corpus.py",
        *(ROOT / "core" / "ds4_core" / "privacy").glob("*.py"),
        ROOT / "docs" / "privacy.md",
    ],
    ids=lambda path: path.name,
)
def test_these_files_hold_no_secret(path: Path) -> None:
    """The tests, the corpus, the detector, redaction and their documentation stay indexable
    (their examples are placeholders or assembled at run time)."""
    assert secret_reason(path.read_text(encoding="utf-8")) is None


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        # The quote after `=` closes the string the name is in: no value follows.
        (f'[{{"note": "{PW}="}}], [], [], "x"', False),
        (f'"db_{PW}=" + read_secret()  # and a "later string"', False),
        # The name's string closed before the operator, or another kind of quote: a value.
        (f'{{"{PW}": "{fake(14)}"}}', True),
        (f"'{PW}=\"{fake(14)}\"'", True),
    ],
)
def test_a_quote_closing_the_names_string_does_not_open_a_value(text: str, secret: bool) -> None:
    assert (secret_reason(text) is not None) is secret
