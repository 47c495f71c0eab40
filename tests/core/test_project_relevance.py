"""Project retrieval relevance (issue 11): files then lines, the size prior, roles, the file
prior hook and the relevance floor, on small real workspaces indexed into real SQLite files."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path

import pytest

from ds4_core.project.discovery import discover_project
from ds4_core.project.index import sync_project
from ds4_core.project.scoring import PROJECT_WEIGHTS
from ds4_core.project.search import ProjectRetrieval, search_project
from ds4_core.retrieval import describe_task
from ds4_core.retrieval.floor import MAX_BELOW_FLOOR
from ds4_core.store import Store, open_store

FILLER = "\n".join(f"    step_{n} = compute_step({n})  # unrelated bookkeeping" for n in range(120))


def _billing_module(n: int) -> str:
    return (
        f'"""Invoice totals for region {n}: tax and shipping surcharge."""\n\n\n'
        f"def invoice_total_{n}(lines, region_tax):\n"
        f"    # the invoice total adds the region tax and the shipping surcharge\n"
        f"    subtotal = sum(line.amount for line in lines)\n"
        f"    return round(subtotal * (1 + region_tax) + {n}, 2)\n"
    )


PRICING = (
    '"""Coupon discounts and price rounding for the checkout."""\n\n\n'
    "def apply_coupon(price, coupon):\n"
    "    # a coupon discount is a percentage; rounding happens once, at the end\n"
    "    return round(price * (1 - coupon.percent / 100), 2)\n\n\n"
    "def setup_steps():\n" + FILLER + "\n\n\n"
    "def rounding_mode():\n"
    "    # checkout rounding: half up, to the cent, after the coupon discount\n"
    "    return 'half-up'\n"
)

CHANGELOG = "# Changelog\n\n" + "\n".join(
    f"- {v}: fixed coupon discount rounding in the checkout (again, release {v})"
    for v in range(1, 30)
)

STREAMS = (
    '"""Stream handles for the export writer."""\n\n\n'
    "class ExportWriter:\n"
    "    # keeps references to open handles and writes each export once\n"
    "    def write(self, handles, references):\n"
    "        for handle in handles:\n"
    "            handle.write(references)\n"
)

PROJECT: dict[str, str] = {
    **{f"src/billing/mod_{n}.py": _billing_module(n) for n in range(12)},
    "src/shop/pricing.py": PRICING,
    "src/shop/streams.py": STREAMS,
    "CHANGELOG.md": CHANGELOG,
    "pyproject.toml": '[project]\nname = "shop"\n# coupon discount rounding settings\n',
}


def _index(root: Path, files: Mapping[str, str], db: Path) -> tuple[Store, str]:
    for rel, text in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    store = open_store(db)
    result = sync_project(store, discover_project(root, use_git=False))
    assert result.files_indexed == len(files)
    return store, result.project_path


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, str]]:
    workdir = tmp_path_factory.mktemp("relevance")
    store, project_path = _index(workdir / "shop", PROJECT, workdir / "db" / "context.db")
    yield store, project_path
    store.close()


def _search(
    shop: tuple[Store, str], query: str, *, max_results: int = 8, **kwargs: object
) -> ProjectRetrieval:
    store, project_path = shop
    return search_project(
        store,
        project_path,
        describe_task(query),
        max_results=max_results,
        max_tokens=kwargs.pop("max_tokens", 20_000),  # type: ignore[arg-type]
        **kwargs,  # type: ignore[arg-type]
    )


def _files(result: ProjectRetrieval) -> list[str]:
    return list(dict.fromkeys(hit.path for hit in result.hits))


# ----------------------------------------------------------------------------- files, then lines


def test_a_prose_request_gets_one_window_per_file_before_any_second_window(shop):
    result = _search(
        shop, "the invoice total with region tax and shipping surcharge", max_results=6
    )
    paths = [hit.path for hit in result.hits]
    assert len(paths) == 6 and len(set(paths)) == 6, paths  # six files, not three twice


def test_a_prose_request_can_return_twenty_files(shop):
    """More than the six files of before: every relevant file when the caller asks for 20."""
    result = _search(
        shop, "the invoice total with region tax and shipping surcharge", max_results=20
    )
    billing = [p for p in _files(result) if p.startswith("src/billing/")]
    assert len(billing) == 12
    assert len(_files(result)) > 6


def test_second_windows_come_after_the_first_window_of_every_ranked_file(shop):
    result = _search(shop, "coupon discount and checkout rounding", max_results=30)
    paths = [hit.path for hit in result.hits]
    first_repeat = next(i for i, path in enumerate(paths) if path in paths[:i])
    assert len(set(paths[first_repeat:]) - set(paths[:first_repeat])) == 0  # files, then lines
    assert paths[0] == "src/shop/pricing.py"


# ----------------------------------------------------------------------------- roles and size


def test_a_change_log_that_repeats_the_request_ranks_below_the_code(shop):
    result = _search(shop, "coupon discount rounding in the checkout is wrong")
    files = _files(result)
    assert files[0] == "src/shop/pricing.py", files
    assert files.index("CHANGELOG.md") > 0 and "pyproject.toml" not in files[:1]


def test_a_request_about_the_change_log_ranks_it_first(shop):
    result = _search(shop, "add the coupon discount rounding fix to the changelog")
    assert _files(result)[0] == "CHANGELOG.md"


def test_the_size_prior_lifts_the_longer_of_two_matching_files(tmp_path):
    """bm25's length normalisation ranks the 3-line file first; the size prior (longer files
    are more often the answer) ranks the 1,200-line file that also names the words twice."""
    body = (
        "def settle(ledger):\n    # settle the ledger balance with the clearing house\n"
        "    return ledger.balance\n"
    )
    helpers = "\n".join(f"def helper_{n}():\n    return {n}\n" for n in range(400))
    long = body + helpers + "\n# the clearing house settles each ledger balance nightly\n"
    files = {"src/short_ledger.py": body, "src/long_ledger.py": long}
    store, project_path = _index(tmp_path / "p", files, tmp_path / "db" / "c.db")
    try:
        request = describe_task("settle the ledger balance with the clearing house")

        def first(weights=PROJECT_WEIGHTS) -> str:
            found = search_project(
                store, project_path, request, max_results=4, max_tokens=20_000, weights=weights
            )
            return found.hits[0].path

        assert first(replace(PROJECT_WEIGHTS, size_weight=0.0)) == "src/short_ledger.py"
        assert first() == "src/long_ledger.py"
    finally:
        store.close()


# ----------------------------------------------------------------------------- exact tiers


def test_a_named_path_or_declared_symbol_still_comes_first(shop):
    named = _search(shop, "the invoice total with region tax in src/billing/mod_3.py")
    assert named.hits[0].path == "src/billing/mod_3.py"
    assert "path" in named.hits[0].reason
    declared = _search(shop, "why does `invoice_total_7` round the total down?")
    assert declared.hits[0].path == "src/billing/mod_7.py"
    assert "declared symbol" in declared.hits[0].reason


# ----------------------------------------------------------------------------- file prior


def test_the_file_prior_lifts_a_file_and_ignores_unknown_paths_and_bad_values(shop):
    query = "the invoice total with region tax and shipping surcharge"
    plain = _files(_search(shop, query))
    target = "src/billing/mod_9.py"
    assert plain[0] != target
    prior = {target: 1.0, "no/such/file.py": 1.0, "src/billing/mod_2.py": -5.0}
    lifted = _files(_search(shop, query, file_prior=prior))
    assert lifted[0] == target
    assert "no/such/file.py" not in lifted
    # weight 0: the prior changes nothing
    unweighted = replace(PROJECT_WEIGHTS, prior_weight=0.0)
    assert _files(_search(shop, query, file_prior=prior, weights=unweighted)) == plain


def test_the_file_prior_can_bring_in_a_file_the_words_do_not_reach(shop):
    query = "the invoice total with region tax and shipping surcharge"
    result = _search(shop, query, max_results=20, file_prior={"src/shop/streams.py": 1.0})
    assert "src/shop/streams.py" in _files(result)


def test_a_prior_does_not_lift_an_unrelated_request_over_the_floor(shop):
    """A relative prior (the Git history's best file scores 1 for any request that matches a
    commit) ranks files; it is not evidence that the request is about the project."""
    query = "Can you explain how Rust's borrow checker handles mutable references?"
    result = _search(shop, query, file_prior={"src/shop/streams.py": 1.0})
    assert result.hits == [] and result.below_floor


# ----------------------------------------------------------------------------- the floor


@pytest.mark.parametrize(
    "query",
    [
        "Write a haiku about the sea, please.",
        "Can you explain how Rust's borrow checker handles mutable references?",
    ],
)
def test_an_unrelated_request_gets_nothing_and_says_what_fell_below_the_floor(shop, query):
    """The project holds `write`, `handles` and `references` (src/shop/streams.py) and
    `check...` (checkout): candidates are found, and all fall below the floor."""
    result = _search(shop, query)
    assert result.status == "ok"
    assert result.hits == []
    below = result.below_floor
    assert below, "the candidates it found are reported"
    assert len(below) <= MAX_BELOW_FLOOR
    assert all(b.kind == "project" and b.floor == PROJECT_WEIGHTS.relevance_floor for b in below)
    assert all(0 <= b.score < b.floor and b.tokens > 0 for b in below)
    scores = [b.score for b in below]
    assert scores == sorted(scores, reverse=True)
    assert below[0].reason.startswith("below the relevance floor (")


def test_a_request_sharing_no_word_with_the_project_finds_nothing_to_report(shop):
    result = _search(shop, "Summarize the plot of Hamlet in three sentences.")
    assert result.status == "ok" and result.hits == [] and result.below_floor == ()


def test_chit_chat_searches_nothing(shop):
    assert _search(shop, "Thanks, that worked great!").status == "generic"
    assert _search(shop, "Thanks, that worked great!").hits == []


def test_a_related_request_passes_the_floor_with_nothing_below_it(shop):
    result = _search(shop, "where do we write the export handles?")
    assert _files(result)[0] == "src/shop/streams.py"
    assert result.below_floor == ()


def test_without_a_floor_the_unrelated_request_gets_its_candidates(shop):
    open_floor = replace(PROJECT_WEIGHTS, relevance_floor=0.0)
    result = _search(
        shop,
        "Can you explain how Rust's borrow checker handles mutable references?",
        weights=open_floor,
    )
    assert result.hits and result.below_floor == ()


def test_the_floor_is_deterministic(shop):
    query = "Can you explain how Rust's borrow checker handles mutable references?"
    assert _search(shop, query).below_floor == _search(shop, query).below_floor


def test_several_folders_merge_their_below_floor_candidates(tmp_path):
    """`ProjectFolders.search` keeps each folder's below-floor candidates, best first."""
    from ds4_core.config import Config
    from ds4_core.project.folders import ProjectFolders

    for name in ("a", "b"):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "streams.py").write_text(STREAMS.replace("export", f"export_{name}"))
    store = open_store(tmp_path / "db" / "context.db")
    config = Config()
    folders = ProjectFolders(lambda: store, lambda: config)
    try:
        folders.set_folders([("a", tmp_path / "a"), ("b", tmp_path / "b")], trusted=True)
        folders.sync()
        query = "Can you explain how Rust's borrow checker handles mutable references?"
        found = folders.search(describe_task(query), max_results=8, max_tokens=20_000)
        assert found.retrieval.hits == []
        below = found.retrieval.below_floor
        assert len(below) == 2 and len({b.source_id for b in below}) == 2
        assert [b.score for b in below] == sorted((b.score for b in below), reverse=True)
    finally:
        store.close()
