"""Automatic claim keys (docs/memory.md "Conflicts"): DS4's shapes keep their key, generic
subjects and prose never get one, and a claim with several "X = Y" clauses is keyed per clause;
memory selection matches identifiers and keys whole."""

from __future__ import annotations

import io
import random

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ds4_core import cli
from ds4_core.memory.claims import (
    DETERMINERS,
    FUNCTION_WORDS,
    GENERIC_WORDS,
    MAX_KEY_CHARS,
    PREPOSITIONS,
    claim_key,
    claim_keys,
    conflict_reason,
    shape_claim,
)
from ds4_core.memory.events import MemoryItem, Mutation
from ds4_core.memory.replay import replay
from ds4_core.memory.selection import PlannedItem, select_memory


def _add(item_id: str, claim: str, at: int, key: str | None = None) -> Mutation:
    item = MemoryItem(item_id, "project", claim, at, (), "/p", key)
    return Mutation(
        "memory", f"mu-{item_id}", at, "add", item, None, None, None, None, "s1", f"e-{item_id}",
        at,
    )  # fmt: skip


def _statuses(*claims: str) -> list[tuple[str, str]]:
    """Each claim added in turn: (its id, `active` or the rejection reason)."""
    state = replay(_add(f"m{i}", claim, i) for i, claim in enumerate(claims))
    rejected = {r.mutation.item.item_id: r.reason for r in state.rejected}  # type: ignore[union-attr]
    return [(f"m{i}", rejected.get(f"m{i}", "active")) for i in range(len(claims))]


@pytest.mark.parametrize(
    ("claim", "expected"),
    [
        # DS4's shapes
        ("Export mode defaults to PerEndpoint", (("export mode", "perendpoint"),)),
        ("`timeout` = 30s", (("timeout", "30s"),)),
        ("Our database is PostgreSQL 16", (("our database", "postgresql 16"),)),
        ("context.maxTokens is 8000.", (("context.maxtokens", "8000"),)),
        # the trial's generic subjects and prose
        ("It is important to run migrations before tests", ()),
        ("It is forbidden to push to main", ()),
        ("There is a race in the scheduler", ()),
        ("This is slow", ()),
        ("The parser is in src/parser.ts", ()),
        ("The parser is slow on files over 1 MB", ()),
        ("We set retries = 3 in CI", ()),
        # several clauses
        ("timeout = 30 seconds; retries = 3", (("timeout", "30 seconds"), ("retries", "3"))),
        ("timeout = 30, retries = 3", (("timeout", "30"), ("retries", "3"))),
        ("retries defaults to 3. Set it in ci.toml.", (("retries", "3"),)),
        ("ports = 80, 443", (("ports", "80, 443"),)),
        ("flags = --a=1 --b=2", (("flags", "--a=1 --b=2"),)),
    ],
)
def test_automatic_keys(claim: str, expected: tuple[tuple[str, str], ...]) -> None:
    assert claim_keys(claim) == expected
    assert claim_key(claim) == (expected[0] if expected else None)


def test_the_trials_generic_and_prose_claims_are_both_kept() -> None:
    assert _statuses(
        "It is important to run migrations before tests", "It is forbidden to push to main"
    ) == [("m0", "active"), ("m1", "active")]
    assert _statuses("The parser is in src/parser.ts", "The parser is slow on files over 1 MB") == [
        ("m0", "active"),
        ("m1", "active"),
    ]


def test_a_clause_of_a_multi_clause_claim_conflicts_with_its_own_key_only() -> None:
    both = shape_claim("timeout = 30 seconds; retries = 3")
    assert conflict_reason(shape_claim("retries = 5"), both) == (
        "same key 'retries' with another value"
    )
    assert conflict_reason(both, shape_claim("retries = 5")) is not None
    assert conflict_reason(shape_claim("retries = 3"), both) is None
    assert conflict_reason(shape_claim("attempts = 5"), both) is None
    statuses = _statuses("timeout = 30 seconds; retries = 3", "timeout = 60 seconds")
    assert statuses[1][1].startswith("conflicts with active item 'm0' (same key 'timeout'")


def test_replay_finds_the_conflict_on_a_later_clause() -> None:
    statuses = _statuses("timeout = 30 seconds; retries = 3", "retries = 5")
    assert statuses[1][1].startswith("conflicts with active item 'm0' (same key 'retries'")


_CLAUSES = st.lists(
    st.sampled_from(["timeout = 30", "timeout = 60", "retries = 3", "retries = 5", "mode = fast"]),
    min_size=1,
    max_size=3,
).map("; ".join)


@settings(max_examples=200, deadline=None)
@given(claims=st.lists(_CLAUSES, min_size=1, max_size=6))
def test_replay_never_leaves_two_conflicting_multi_clause_claims_active(claims: list[str]) -> None:
    active = replay(_add(f"m{i}", claim, i) for i, claim in enumerate(claims)).active()
    shapes = [shape_claim(item.item.claim) for item in active]  # type: ignore[union-attr]
    for index, first in enumerate(shapes):
        for second in shapes[index + 1 :]:
            assert conflict_reason(first, second) is None
            assert conflict_reason(second, first) is None


def test_an_explicit_key_still_replaces_the_automatic_ones() -> None:
    assert _statuses("It is forbidden to push to main", "It is fine to push to dev")[1][1] == (
        "active"
    )
    explicit = shape_claim("timeout = 30; retries = 3", "limits")
    assert explicit.pairs == (("limits", "timeout = 30; retries = 3"),)
    state = replay(
        [
            _add("m0", "It is forbidden to push to main", 0, key="push policy"),
            _add("m1", "Pushing to main is allowed", 1, key="push policy"),
        ]
    )
    assert [r.mutation.item.item_id for r in state.rejected] == ["m1"]  # type: ignore[union-attr]


_NAMES = st.from_regex(r"[a-z][a-z0-9]{0,6}(_[a-z0-9]{1,4})?", fullmatch=True).filter(
    lambda n: n not in GENERIC_WORDS | DETERMINERS | FUNCTION_WORDS | PREPOSITIONS
)
_VALUES = st.from_regex(r"[a-z0-9][a-z0-9.]{0,6}", fullmatch=True).filter(
    lambda v: v.rstrip(".") and v not in GENERIC_WORDS | FUNCTION_WORDS | PREPOSITIONS
)
_PROSE = st.lists(
    st.sampled_from(["run", "the", "tests", "before", "slow", "on", "files", "main", "x"]),
    min_size=1,
    max_size=8,
).map(" ".join)


@settings(max_examples=200, deadline=None)
@given(name=_NAMES, value=_VALUES)
def test_ds4_shapes_key_a_name(name: str, value: str) -> None:
    """Each of DS4's three shapes keys an identifier with its value, backticked or not."""
    for claim in (f"{name} defaults to {value}", f"{name} = {value}", f"`{name}` is {value}"):
        assert claim_keys(claim) == ((name, value.rstrip(".")),)


@settings(max_examples=200, deadline=None)
@given(
    subject=st.sampled_from(sorted(GENERIC_WORDS | DETERMINERS)),
    capital=st.booleans(),
    separator=st.sampled_from([" is ", " = ", " defaults to "]),
    rest=_PROSE,
)
def test_a_generic_subject_never_keys(
    subject: str, capital: bool, separator: str, rest: str
) -> None:
    """A pronoun, a demonstrative, "there" or a bare determiner is no name, whatever follows."""
    claim = (subject.capitalize() if capital else subject) + separator + rest
    assert claim_keys(claim) == ()


@settings(max_examples=200, deadline=None)
@given(name=_NAMES, stop=st.sampled_from(sorted(PREPOSITIONS | FUNCTION_WORDS)), rest=_PROSE)
def test_an_is_clause_with_a_prose_value_never_keys(name: str, stop: str, rest: str) -> None:
    """ "X is <prose>" (a preposition or a verb-like word in the value, or more than three
    words) has no key, even for a name."""
    assert claim_keys(f"`{name}` is {stop} {rest}") == ()
    assert claim_keys(f"{name} is {rest} and more words here") == ()


@settings(max_examples=300, deadline=None)
@given(
    settings_=st.dictionaries(_NAMES, _VALUES, min_size=1, max_size=5),
    name=_NAMES,
    value=_VALUES,
    joiner=st.sampled_from(["; ", "\n", ", "]),
    seed=st.integers(0, 1000),
)
def test_several_clauses_are_keyed_per_clause(
    settings_: dict[str, str], name: str, value: str, joiner: str, seed: int
) -> None:
    """A claim of "X = Y" clauses has one key per clause; a one-clause claim conflicts with it
    exactly when it gives one of its keys another value, and the same clauses in another order
    never conflict."""
    pairs = [(k, v.rstrip(".")) for k, v in settings_.items()]
    claim = joiner.join(f"{k} = {v}" for k, v in pairs)
    assert claim_keys(claim) == tuple(pairs)
    whole = shape_claim(claim)
    single = shape_claim(f"{name} = {value}")
    differs = name in settings_ and settings_[name].rstrip(".") != value.rstrip(".")
    assert (conflict_reason(single, whole) is not None) == differs
    assert (conflict_reason(whole, single) is not None) == differs
    shuffled = list(pairs)
    random.Random(seed).shuffle(shuffled)
    reordered = shape_claim("; ".join(f"{k} = {v}" for k, v in shuffled))
    assert conflict_reason(reordered, whole) is None


def test_selection_matches_identifiers_and_keys_whole() -> None:
    """The trial: 600 claims `setting_N defaults to N`; asking about setting_42 selects it
    alone, not setting_420..429 (identifier substrings) nor setting_4 (key substring)."""
    items = [
        PlannedItem(f"m{n}", f"setting_{n} defaults to {n}", "project", n, n, key=f"setting_{n}")
        for n in range(600)
    ]
    chosen = select_memory(items, "what does setting_42 default to?", max_results=12)
    assert [s.item.item_id for s in chosen] == ["m42"]
    assert chosen[0].reason.startswith("identifiers setting_42; key ")
    assert chosen[0].reason.count("setting_42") == 2
    dotted = [PlannedItem("d", "config.retries defaults to 3", "project", 1, 1)]
    assert select_memory(dotted, "why is `retries` ignored?", max_results=3)[0].reason.startswith(
        "identifiers retries"
    )


def test_selection_uses_every_clause_key() -> None:
    items = [PlannedItem("m", "timeout = 30 seconds; retries = 3", "project", 1, 1, "timeout")]
    chosen = select_memory(items, "how many retries are allowed", max_results=3)
    assert "retries" in chosen[0].reason.partition("key ")[2]


@pytest.mark.parametrize(("command", "default"), [("remember", "project"), ("pin", "session")])
def test_help_names_each_commands_scope_default(command: str, default: str) -> None:
    """The trial: `ds4 remember --help` showed pin's default beside remember's."""
    out, err = io.StringIO(), io.StringIO()
    assert cli.run([command, "--help"], out, err) == 0
    text = " ".join(out.getvalue().split())
    assert f"--scope {{{','.join(SCOPES[command])}}} default: {default}" in text
    assert "(pin)" not in text


SCOPES = {"remember": ("session", "project"), "pin": ("session", "branch", "project")}


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=st.sampled_from("ab _=;,.\n`'\"isdefaultotheIt3"), max_size=80))
@example(text="a.=3")  # a determiner with a full stop (found by this test in CI)
@example(text="`it` = 3")  # a generic word in backticks
def test_any_text_gets_sound_keys(text: str) -> None:
    """Whatever the text: keys are non-empty, at most MAX_KEY_CHARS, never a generic word
    alone, and an explicit key is the only one."""
    for key, value in claim_keys(text):
        assert key and value and len(key) <= MAX_KEY_CHARS
        assert key not in GENERIC_WORDS | DETERMINERS
    assert shape_claim(text, "k").keys == ("k",)
