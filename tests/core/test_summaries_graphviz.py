"""`ds4 summaries --format svg|png`: Graphviz's `dot` from PATH, run with a list argv and a
time bound; a clear message naming `--format` when it is missing (docs/compaction.md "Graph
pictures"). A stand-in `dot` script checks the call; the real one is used when installed."""

from __future__ import annotations

import io
import json
import shutil
import stat
import sys
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


@posix_stand_in
def test_png_needs_output_and_is_written_as_bytes(
    session: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_dot(
        tmp_path, monkeypatch, "sys.stdout.buffer.write(b'\\x89PNG\\r\\n\\x1a\\n\\x00\\xff')\n"
    )
    code, out, err = summaries(tmp_path, session, "--format", "png")
    assert code == 2 and out == "" and "--output" in err
    assert not (tmp_path / "bin" / "call.json").exists()  # refused before dot ran
    target = tmp_path / "graph.png"
    code, out, err = summaries(tmp_path, session, "--format", "png", "--output", str(target))
    assert code == 0, err
    assert out == "" and str(target) in err
    assert target.read_bytes() == b"\x89PNG\r\n\x1a\n\x00\xff"


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
    head = target.read_bytes()[:200]
    assert (
        (b"<svg" in head or b"<?xml" in head)
        if image_format == "svg"
        else head.startswith(b"\x89PNG")
    )


@needs_graphviz
def test_real_graphviz_accepts_hostile_labels() -> None:
    from ds4_core.compaction.render import render_dot

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
    image = render_with_graphviz(render_dot(view, {weird + "c": (weird, weird, 2)}), "svg")
    assert b"<svg" in image
