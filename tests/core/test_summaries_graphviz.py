"""`ds4 summaries --format svg|png`: Graphviz's `dot` from PATH, run with a list argv and a
time bound; a clear message naming `--format` when it is missing (docs/compaction.md "Graph
pictures"). A stand-in `dot` script checks the call; the real one is used when installed."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import signal
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ds4_core import cli
from ds4_core.cli.graphviz import render_with_graphviz
from ds4_core.requests import RequestError

V3 = "v3-branching-compaction.jsonl"
REAL_DOT = shutil.which("dot")
needs_graphviz = pytest.mark.skipif(
    REAL_DOT is None, reason="Graphviz's `dot` is not installed on this machine"
)

posix_stand_in = pytest.mark.skipif(
    sys.platform == "win32", reason="the stand-in `dot` is a script run through its #! line"
)


def run_ds4(db: Path, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.run(["--db", str(db), *argv], out, err)
    return code, out.getvalue(), err.getvalue()


def summaries(tmp_path: Path, session: Path, *options: str) -> tuple[int, str, str]:
    """`ds4 summaries --session SESSION OPTIONS...` on a database under `tmp_path`."""
    return run_ds4(tmp_path / "db", "summaries", "--session", str(session), *options)


@pytest.fixture
def session(pi_session_copy: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("DS4_DB", raising=False)
    return pi_session_copy(V3)


def fake_dot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> Path:
    """A `dot` stand-in, alone on PATH: a Python script in `tmp_path/bin` that records its
    argv and stdin in `call.json` next to it, then runs `body`. Returns the script."""
    directory = tmp_path / "bin"
    directory.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("PATH", str(directory))
    script = directory / "dot"
    record = directory / "call.json"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        "data = sys.stdin.buffer.read().decode('utf-8')\n"
        f"open({str(record)!r}, 'w').write(json.dumps({{'argv': sys.argv, 'stdin': data}}))\n"
        + body,
        encoding="utf-8",
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_missing_dot_is_a_usage_error_naming_format(
    session: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    code, out, err = summaries(tmp_path, session, "--format", "svg")
    assert code == 2 and out == ""
    assert "--format svg" in err and "Graphviz" in err and "--dot" in err
    assert "Traceback" not in err


@posix_stand_in
def test_svg_runs_dot_from_path_with_a_list_argv_and_the_dot_on_stdin(
    session: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = fake_dot(tmp_path, monkeypatch, "sys.stdout.write('<svg>drawn</svg>\\n')\n")
    code, out, err = summaries(tmp_path, session, "--format", "svg")
    assert code == 0, err
    assert out == "<svg>drawn</svg>\n"
    call = json.loads((tmp_path / "bin" / "call.json").read_text(encoding="utf-8"))
    assert call["argv"] == [str(script), "-Tsvg"]
    code, dot, _err = summaries(tmp_path, session, "--dot")
    assert code == 0 and call["stdin"] == dot  # exactly the --dot text


PNG_NEEDS_OUTPUT = "ds4: --output: --format png writes a binary image; give --output PATH\n"


@posix_stand_in
def test_png_needs_output_and_is_written_as_bytes(
    session: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_dot(
        tmp_path, monkeypatch, "sys.stdout.buffer.write(b'\\x89PNG\\r\\n\\x1a\\n\\x00\\xff')\n"
    )
    code, out, err = summaries(tmp_path, session, "--format", "png")
    assert (code, out, err) == (2, "", PNG_NEEDS_OUTPUT)  # the whole line: --output once
    assert not (tmp_path / "bin" / "call.json").exists()  # refused before dot ran
    target = tmp_path / "graph.png"
    code, out, err = summaries(tmp_path, session, "--format", "png", "--output", str(target))
    assert code == 0, err
    assert out == "" and err == f"ds4: wrote the PNG graph to '{target}'\n"
    assert target.read_bytes() == b"\x89PNG\r\n\x1a\n\x00\xff"


def test_png_without_output_is_refused_before_the_session_is_read(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-session.jsonl"
    code, out, err = summaries(tmp_path, missing, "--format", "png")
    assert (code, out, err) == (2, "", PNG_NEEDS_OUTPUT)  # not "--session: ... not found"


def test_format_is_exclusive_with_dot_and_json(session: Path, tmp_path: Path) -> None:
    for other in ("--dot", "--json"):
        code, _out, err = summaries(tmp_path, session, "--format", "svg", other)
        assert code == 2 and "not allowed with" in err
    code, _out, err = summaries(tmp_path, session, "--format", "pdf")
    assert code == 2 and "--format" in err


@posix_stand_in
def test_a_failing_dot_is_reported_with_its_first_error_line(
    session: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_dot(
        tmp_path,
        monkeypatch,
        "sys.stderr.write('Error: syntax error in line 1\\nmore\\n')\nsys.exit(3)\n",
    )
    code, out, err = summaries(tmp_path, session, "--format", "svg")
    assert code == 2 and out == ""
    assert "exit code 3" in err and "syntax error in line 1" in err and "more" not in err


@posix_stand_in
def test_a_hanging_dot_is_stopped_at_the_time_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_dot(tmp_path, monkeypatch, "import time\ntime.sleep(30)\n")
    with pytest.raises(RequestError) as caught:
        render_with_graphviz("digraph g {}\n", "svg", timeout=0.5)
    assert caught.value.field == "format"
    assert "did not finish within 0.5 s" in str(caught.value)


@needs_graphviz
@pytest.mark.parametrize("image_format", ["svg", "png"])
def test_real_graphviz_draws_the_session_graph(
    session: Path, tmp_path: Path, image_format: str
) -> None:
    target = tmp_path / f"graph.{image_format}"
    code, _out, err = summaries(
        tmp_path,
        session,
        "--format",
        image_format,
        "--output",
        str(target),
    )
    assert code == 0, err
    assert err == f"ds4: wrote the {image_format.upper()} graph to '{target}'\n"  # no warning
    if image_format == "svg":  # the legend's HTML-like label is drawn as text
        assert b"an earlier root the branch moved past" in target.read_bytes()
    head = target.read_bytes()[:200]
    assert (
        (b"<svg" in head or b"<?xml" in head)
        if image_format == "svg"
        else head.startswith(b"\x89PNG")
    )


@needs_graphviz
def test_real_graphviz_accepts_hostile_labels() -> None:
    from ds4_core.compaction.render import EntrySpan, render_dot

    weird = 'q"uo\\te\n<b>&amp;</b>\r]; digraph x { a -> b }\x00\ud800'
    view = {
        "sessionId": weird,
        "nodes": [
            {
                "summaryId": weird,
                "kind": "aggregate",
                "level": 1,
                "childIds": [weird + "c"],
                "role": "active-root",
            },
            {
                "summaryId": weird + "c",
                "kind": "segment",
                "level": 0,
                "childIds": [],
                "role": "active",
            },
        ],
    }
    spans = {weird + "c": EntrySpan(weird, weird, 2)}
    drawing = render_with_graphviz(render_dot(view, spans), "svg")
    assert b"<svg" in drawing.image


PNG_BODY = "sys.stdout.buffer.write(b'\\x89PNG\\r\\n\\x1a\\n-image-')\n"


@posix_stand_in
@pytest.mark.parametrize("options", [["--format", "png"], ["--dot"], ["--json"], []])
def test_output_never_overwrites_the_session_it_reads(
    session: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: list[str]
) -> None:
    fake_dot(tmp_path, monkeypatch, PNG_BODY)
    before = session.read_bytes()
    link = tmp_path / "graph.png"
    link.symlink_to(session)  # another name for the same file
    for target in (session, link):
        code, out, err = summaries(tmp_path, session, *options, "--output", str(target))
        assert (code, out) == (2, "")
        assert err == (
            f"ds4: --output: '{target}' is the session file --session reads; ds4 never "
            "overwrites it, choose another path\n"
        )
    assert session.read_bytes() == before
    assert not (tmp_path / "bin" / "call.json").exists()  # refused before dot ran


def test_output_refuses_a_jsonl_path_and_the_database(session: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.JSONL"
    code, _out, err = summaries(tmp_path, session, "--dot", "--output", str(other))
    assert code == 2 and err.startswith(f"ds4: --output: '{other}' ends in .jsonl")
    assert not other.exists()
    summaries(tmp_path, session)  # creates the database
    database = tmp_path / "db"
    before = database.read_bytes()
    code, _out, err = summaries(tmp_path, session, "--dot", "--output", str(database))
    assert code == 2 and err == (
        f"ds4: --output: '{database}' is ds4's database; ds4 never overwrites it, choose "
        "another path\n"
    )
    assert database.read_bytes() == before


def test_output_is_written_whole_or_not_at_all(
    session: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    target = out_dir / "graph.dot"
    target.write_text("old picture\n", encoding="utf-8")
    target.chmod(0o640)
    code, dot, err = summaries(tmp_path, session, "--dot", "--output", str(target))
    assert code == 0, err
    assert target.read_text(encoding="utf-8").startswith("digraph summaries {")
    if sys.platform != "win32":
        assert stat.S_IMODE(target.stat().st_mode) == 0o640  # the file's permissions are kept
    assert sorted(p.name for p in out_dir.iterdir()) == ["graph.dot"]  # no temporary left
    target.write_text("old picture\n", encoding="utf-8")

    def failing_replace(source: object, destination: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("os.replace", failing_replace)
    code, _out, err = summaries(tmp_path, session, "--dot", "--output", str(target))
    assert code == 2 and err == (
        f"ds4: --output: cannot write '{target}': No space left on device; choose a writable path\n"
    )
    assert target.read_text(encoding="utf-8") == "old picture\n"
    assert sorted(p.name for p in out_dir.iterdir()) == ["graph.dot"]


@posix_stand_in
@pytest.mark.parametrize("image_format", ["svg", "png"])
def test_a_dot_that_prints_something_else_is_an_error_naming_format(
    session: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, image_format: str
) -> None:
    fake_dot(tmp_path, monkeypatch, "sys.stdout.write('garbage\\n')\n")
    target = tmp_path / f"graph.{image_format}"
    code, out, err = summaries(tmp_path, session, "--format", image_format, "--output", str(target))
    assert code == 2 and out == ""
    assert err.startswith(f"ds4: --format {image_format}: `dot -T{image_format}` exited 0 but")
    assert "garbage" in err and not target.exists()
    code, out, err = summaries(tmp_path, session, "--format", "svg")
    assert code == 2 and out == "" and "not SVG" in err


@posix_stand_in
def test_dot_warnings_reach_stderr_and_a_scaled_png_suggests_svg(
    session: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    warning = "graph is too large for cairo-renderer bitmaps. Scaling by 0.064 to fit"
    fake_dot(
        tmp_path, monkeypatch, f"sys.stderr.write({'dot: ' + warning + chr(10)!r})\n" + PNG_BODY
    )
    target = tmp_path / "graph.png"
    code, _out, err = summaries(tmp_path, session, "--format", "png", "--output", str(target))
    assert code == 0, err
    assert err.splitlines() == [
        f"ds4: dot: {warning}",
        "ds4: dot scaled the PNG down to fit; --format svg draws it full size",
        f"ds4: wrote the PNG graph to '{target}'",
    ]


def _alive(pid: int) -> bool:
    """Whether process `pid` still runs (a zombie waiting for its reaper counts as gone)."""
    if Path("/proc/self/stat").exists():  # Linux: the state letter after the command name
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except (FileNotFoundError, ProcessLookupError):
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@posix_stand_in
def test_a_timed_out_dot_is_stopped_with_the_children_it_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid_file = tmp_path / "child.pid"
    fake_dot(
        tmp_path,
        monkeypatch,
        "import subprocess, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n",
    )
    with pytest.raises(RequestError, match="did not finish within 2 s"):
        render_with_graphviz("digraph g {}\n", "svg", timeout=2.0)
    child = int(pid_file.read_text())
    try:
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child), "dot's child outlived the timeout"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)


def test_an_imported_pi_summary_child_leaves_the_aggregate_span_open(
    session: Path, tmp_path: Path
) -> None:
    """The v3 branching fixture: Pi compacted before e3; ds4 compacts at e6 over e3, e4. The
    aggregate over Pi's summary and ds4's segment also covers what precedes e3."""
    db = tmp_path / "db"
    code, entry, err = run_ds4(
        db, "--set", "compaction.keepRecentTokens=1", "compact", "--session", str(session),
        "--leaf", "e6", "--entry",
    )  # fmt: skip
    assert code == 0, err
    with session.open("a", encoding="utf-8") as handle:
        handle.write(entry)
    code, dot, err = summaries(tmp_path, session, "--dot")
    assert code == 0, err
    spans = re.findall(r"<BR/>((?:entries|entry) [^<]*)<BR/>", dot)
    assert sorted(spans) == ["entries before e3", "entries e3 .. e4 (2)", "entries … e3 .. e4 (2+)"]
