"""`ds4 usage` (issue 14): a provider's usage recorded from the command line on a stored plan,
the calibration it leads to, and the errors a user can fix, naming the option."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from ds4_core import cli

SESSION = "pi-mono-v1-large-session.jsonl"


def ds4(db: Path, *argv: str) -> tuple[int, str, str]:
    """`ds4 --db DB ARGV...` in process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    return cli.run(["--db", str(db), *argv], out, err), out.getvalue(), err.getvalue()


@pytest.fixture
def planned(tmp_path: Path, pi_sessions_dir: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A stored plan's manifest id (`tmp_path/db`)."""
    monkeypatch.setenv("COLUMNS", "100")
    code, out, err = ds4(
        tmp_path / "db",
        "plan",
        "--session",
        str(pi_sessions_dir / SESSION),
        "--model",
        "anthropic/claude-sonnet-4-5",
        "--json",
        "where is the theme loaded?",
    )
    assert code == 0, err
    return str(json.loads(out)["manifestId"])


def test_reports_calibrate_and_the_reports_say_so(
    tmp_path: Path, planned: str, pi_sessions_dir: Path
) -> None:
    db = tmp_path / "db"
    for _ in range(2):  # the same manifest reported again replaces its sample
        code, out, _ = ds4(db, "usage", "--manifest", planned, "--input", "10", "--cache-read", "4")
        assert code == 0 and "calibration sample: recorded" in out
    assert "0 accepted of the 3 needed, 1 reported" in out  # 14 of ~30,000: out of bounds
    for n in range(3):  # three plans, each reported at 1.3 times its estimate
        code, out, _ = ds4(
            db, "plan", "--session", str(pi_sessions_dir / SESSION), "--model",
            "anthropic/claude-sonnet-4-5", "--json", f"theme {n}",
        )  # fmt: skip
        plan = json.loads(out)
        cache_read = str(round(plan["estimatedTokens"] * 1.3) - 10)
        code, out, _ = ds4(
            db, "usage", "--manifest", plan["manifestId"], "--input", "10", "--cache-read",
            cache_read, "--cache-write", "0",
        )  # fmt: skip
        assert code == 0
    flat = " ".join(out.split())
    assert re.search(
        r"calibration: anthropic/claude-sonnet-4-5 ratio 1\.(29|30)\d* \(calibrated from 3 of 4 "
        r"samples\)",
        flat,
    ), flat
    assert "warning: the provider counts 1.30x the estimated input tokens" in flat
    code, out, _ = ds4(db, "manifest", plan["manifestId"])
    flat = " ".join(out.split())
    actual = round(plan["estimatedTokens"] * 1.3)
    assert f"actualTokens {actual:,} reported by anthropic/claude-sonnet-4-5, 1.300x" in flat
    assert f"cache read {actual - 10:,}, write 0" in flat


def test_a_failed_call_is_recorded_without_a_sample(tmp_path: Path, planned: str) -> None:
    code, out, _ = ds4(
        tmp_path / "db", "usage", "--manifest", planned, "--input", "9", "--stop-reason", "error",
        "--json",
    )  # fmt: skip
    result = json.loads(out)
    assert code == 0 and result["sample"] is False
    assert result["whyNot"] == "the call ended with stopReason 'error'"
    assert result["actualTokens"] == 9 and result["calibration"]["samples"] == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--input", "-1"], "--input: expected an integer in 0..9,007,199,254,740,991 (tokens)"),
        (["--input", "1", "--cache-write", "-5"], "--cache-write: expected an integer in 0.."),
        (["--input", "99999999999999999999"], "--input: expected an integer in 0.."),
        (["--input", "1", "--stop-reason", "stop\n"], "--stop-reason: expected Pi's stop reason"),
        (["--input", "1", "--model", "nobody"], "--model: expected PROVIDER/ID"),
        (["--input", "x"], "argument --input: invalid int value: 'x'"),
    ],
)
def test_bad_values_name_the_option(
    tmp_path: Path, planned: str, argv: list[str], message: str
) -> None:
    code, _, err = ds4(tmp_path / "db", "usage", "--manifest", planned, *argv)
    assert code == 2 and message in err


def test_an_unknown_manifest_names_the_database(tmp_path: Path, planned: str) -> None:
    code, _, err = ds4(tmp_path / "db", "usage", "--manifest", "m-nope", "--input", "1")
    assert code == 2
    assert err.startswith("ds4: --manifest: no manifest with id 'm-nope'")
    assert str(tmp_path / "db") in err
