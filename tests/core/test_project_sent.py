"""`stale_windows`: which sent windows of one file are stale, over which lines."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ds4_core.project.sent import SentWindow, SentWindowMemory, stale_windows

LINES = [f"line {n}" for n in range(1, 201)]


def window(
    plan: str, start: int, end: int, sent_at: str = "2026-01-01T00:00:00.000Z"
) -> SentWindow:
    return SentWindow(
        plan,
        f"{plan}:{start}",
        "/p",
        "a.py",
        "h",
        start,
        end,
        "\n".join(LINES[start - 1 : end]),
        sent_at,
    )


def spans(records: list[dict[str, object]]) -> list[tuple[object, ...]]:
    return sorted(
        (r["startLine"], r["endLine"], r["changeStartLine"], r["changeEndLine"]) for r in records
    )


def test_overlapping_windows_of_one_plan_are_each_checked() -> None:
    live = list(LINES)
    live[103] = "edited"  # line 104
    live[149] = "edited"  # line 150
    windows = [window("m-1", 69, 148), window("m-1", 137, 200)]
    assert spans(stale_windows(windows, live)) == [(69, 148, 104, 104), (137, 200, 150, 150)]


def test_a_newer_plan_supersedes_only_the_lines_it_sent_again() -> None:
    live = list(LINES)
    live[4] = live[74] = "edited"  # lines 5 and 75
    older = window("m-1", 1, 80, "2026-01-01T00:00:00.000Z")
    newer = window("m-2", 69, 148, "2026-01-02T00:00:00.000Z")
    records = stale_windows([older, newer], live)
    # m-2 sent line 75 as it was too: it is stale for m-2; for m-1 only line 5 counts
    assert spans(records) == [(1, 80, 5, 5), (69, 148, 75, 75)]
    assert [r["change"] for r in records if r["manifestId"] == "m-1"] == ["line 5 changed"]


def test_a_deleted_file_makes_every_window_stale_and_missing_lines_no_longer_exist() -> None:
    windows = [window("m-1", 1, 80)]
    assert spans(stale_windows(windows, None)) == [(1, 80, 1, 80)]
    (record,) = stale_windows(windows, LINES[:10])
    assert (record["changeStartLine"], record["changeEndLine"]) == (11, 80)


@given(st.sets(st.integers(min_value=1, max_value=200), max_size=6))
def test_the_range_runs_from_the_first_to_the_last_changed_line(edited: set[int]) -> None:
    live = [f"edited {n}" if n in edited else line for n, line in enumerate(LINES, start=1)]
    records = stale_windows([window("m-1", 69, 148)], live)
    inside = sorted(n for n in edited if 69 <= n <= 148)
    assert spans(records) == ([(69, 148, inside[0], inside[-1])] if inside else [])


def test_the_memory_keeps_the_newest_windows() -> None:
    memory = SentWindowMemory(capacity=2)
    memory.add([window("m-1", 1, 80), window("m-1", 69, 148)])
    memory.add([window("m-2", 137, 200)])
    assert [w.manifest_id for w in memory.of_file("/p", "a.py")] == ["m-1", "m-2"]
    assert len(memory) == 2 and memory.paths("/p") == ["a.py"]
