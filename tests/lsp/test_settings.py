"""Settings from initializationOptions and didChangeConfiguration: warnings, never fatal."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lsp_helpers import TIMEOUT_S, Servers, execute, plan_params, request
from lsprotocol import types
from pytest_lsp import LanguageClient


def warnings_shown(client: LanguageClient) -> list[str]:
    """Texts of the window/showMessage warnings received so far."""
    return [m.message for m in client.messages if m.type == types.MessageType.Warning]


async def test_invalid_initial_settings_are_shown_and_ignored(
    servers: Servers, session_file: Path
) -> None:
    """Each invalid setting gets a showMessage warning naming it; the server still plans."""
    client = await servers.start(
        initialization_options={
            "settings": {
                "context": {"maxProjectTokens": -5},
                "retrieval": {"maxResults": "many"},
                "noSuchSetting": 1,
            }
        }
    )
    shown = warnings_shown(client)
    for key in ("context.maxProjectTokens", "retrieval.maxResults", "noSuchSetting"):
        assert any(key in text for text in shown), (key, shown)

    health = await execute(client, "ds4.health")
    assert health["status"] == "warning" and len(health["configWarnings"]) == 3
    planned = await request(client, "ds4/plan", plan_params(session_file))
    assert planned["mode"] == "managed"
    assert planned["budget"]["maxProjectTokens"] >= 0


async def test_settings_under_a_ds4_key_are_applied(servers: Servers, session_file: Path) -> None:
    """`{"ds4": {...}}` (VS Code's section layout) is read like top-level settings."""
    client = await servers.start(
        initialization_options={"settings": {"ds4": {"context": {"mode": "observer"}}}}
    )
    assert warnings_shown(client) == []
    planned = await request(client, "ds4/plan", plan_params(session_file))
    assert planned["mode"] == "observer"


async def test_invalid_initialization_options_are_shown_and_defaulted(servers: Servers) -> None:
    """Wrongly typed initializationOptions fields are ignored with a warning naming them."""
    client = await servers.start(initialization_options={"trusted": "yes", "settings": [1]})
    shown = warnings_shown(client)
    assert any("initializationOptions.trusted: expected true or false" in t for t in shown)
    assert any("initializationOptions.settings: expected an object" in t for t in shown)
    health = await execute(client, "ds4.health")
    assert health["server"]["trusted"] is False


async def test_did_change_configuration_applies_valid_and_reports_invalid_settings(
    client: LanguageClient, session_file: Path
) -> None:
    """A new valid value takes effect; an invalid one in the same change is shown and
    ignored."""
    shown_future = client.protocol.wait_for_notification_async(types.WINDOW_SHOW_MESSAGE)
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(
            settings={"ds4": {"context": {"mode": "observer"}, "retrieval": {"maxResults": 0}}}
        )
    )
    shown = await asyncio.wait_for(shown_future, TIMEOUT_S)
    assert shown.type == types.MessageType.Warning
    assert "retrieval.maxResults" in shown.message

    planned = await request(client, "ds4/plan", plan_params(session_file))
    assert planned["mode"] == "observer"


async def test_a_trust_grant_after_start_up_is_applied_without_warnings(
    client: LanguageClient,
) -> None:
    """`trusted: true` sent with didChangeConfiguration (how editors report a later trust grant)
    changes the server's trust state and is not mistaken for an unknown setting."""
    before = await execute(client, "ds4.health")
    assert before["server"]["trusted"] is False
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"ds4": {"trusted": True}})
    )
    after = await execute(client, "ds4.health")
    assert after["server"]["trusted"] is True
    assert warnings_shown(client) == []


async def test_the_log_level_setting_quiets_the_server(
    servers: Servers, session_file: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """`diagnostics.logLevel: error` turns off the engine's INFO records (sent to the client
    as `window/logMessage` at the default level), while the one line per served request is
    sent at any level; neither server writes INFO lines to stderr."""
    quiet = await servers.start(
        initialization_options={"settings": {"diagnostics": {"logLevel": "error"}}}
    )
    await request(quiet, "ds4/plan", plan_params(session_file))
    quiet_logged = [m.message for m in quiet.log_messages]
    await servers.stop(quiet)
    quiet_err = capfd.readouterr().err
    loud = await servers.start()
    await request(loud, "ds4/plan", plan_params(session_file))
    loud_logged = [m.message for m in loud.log_messages]
    await servers.stop(loud)
    loud_err = capfd.readouterr().err
    assert any(line.startswith("plan: ") for line in loud_logged)
    assert not any(line.startswith("plan: ") for line in quiet_logged)
    assert any(line.startswith("ds4/plan: ") for line in loud_logged)
    assert any(line.startswith("ds4/plan: ") for line in quiet_logged)
    assert " INFO " not in loud_err + quiet_err
