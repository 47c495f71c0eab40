"""Privacy-safe failure descriptions (`ds4_core.logs`)."""

from __future__ import annotations

import errno
import importlib
import logging
import pkgutil

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ds4_core.engine
from ds4_core.logs import describe_failure, errno_name, log_failure


def test_errno_name_gives_the_symbolic_code_never_the_message_or_path() -> None:
    error = FileNotFoundError(errno.ENOENT, "No such file or directory", "/secret/path.txt")
    assert errno_name(error) == "ENOENT"
    assert errno_name(PermissionError(errno.EACCES, "Permission denied")) == "EACCES"
    assert errno_name(OSError(errno.ELOOP, "loop")) == "ELOOP"


def test_errno_name_without_an_errno_is_the_exception_type() -> None:
    assert errno_name(OSError("no errno")) == "OSError"
    assert errno_name(IsADirectoryError("x")) == "IsADirectoryError"


def test_errno_name_of_an_unknown_number_is_the_number() -> None:
    unknown = max(errno.errorcode) + 1000
    assert errno_name(OSError(unknown, "made up")) == str(unknown)


@given(number=st.integers(-5, 400), message=st.text(max_size=20))
def test_errno_name_never_quotes_the_message(number: int, message: str) -> None:
    name = errno_name(OSError(number, f"<<{message}>>"))
    assert name == errno.errorcode.get(number, str(number))
    assert "<<" not in name


def test_describe_failure_names_type_and_location_only() -> None:
    try:
        raise KeyError("user secret")
    except KeyError as exc:
        described = describe_failure(exc)
    assert described.startswith("KeyError at test_logs.py:")
    assert "secret" not in described
    assert describe_failure(ValueError("never raised")) == "ValueError"


def test_log_failure_warns_without_the_message(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("ds4.test_logs")
    try:
        raise ValueError("user text")
    except ValueError as exc:
        with caplog.at_level(logging.DEBUG, logger="ds4.test_logs"):
            log_failure(log, "thing failed", exc)
    assert "user text" not in caplog.text
    assert "thing failed: ValueError at test_logs.py:" in caplog.text
    assert "call path test_logs.py:" in caplog.text


def test_the_engine_package_logs_to_one_logger() -> None:
    """Every module of `ds4_core.engine` that logs uses `ds4_core.engine`, the logger name of
    the single-module engine (engine/context.py), so log lines kept their name."""
    names = {}
    for module in pkgutil.iter_modules(ds4_core.engine.__path__):
        log = getattr(importlib.import_module(f"ds4_core.engine.{module.name}"), "log", None)
        if isinstance(log, logging.Logger):
            names[module.name] = log.name
    assert "facade" in names and "planning" in names
    assert set(names.values()) == {"ds4_core.engine"}, names
