"""Secret files and secret lines never reach the project index (issue 3, "What is indexed").

Secret-shaped values are built at run time, so this repository never holds a realistic key.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ds4_core.engine import ContextEngine
from ds4_core.requests import RetrieveRequest


def _database_bytes(db: Path) -> bytes:
    return b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*") if p.is_file())


@pytest.fixture
def secret_values() -> dict[str, str]:
    return {
        "github": "ghp_" + "Q7" * 18,
        "aws": "AKIA" + "Z3X9" * 4,
        "assigned": "s3cr3t-" + "k9" * 8,
        "envfile": "ENVONLY" + "v" * 12,
        "pem": "MIIB" + "q" * 40,
        "django": "django-insecure-" + "k3j4h5" * 4,
        "aws_secret": "wJalr" + "XUtnF9" * 5,
    }


def test_secret_files_and_lines_never_reach_the_index(
    tmp_path: Path, secret_values: dict[str, str]
) -> None:
    project = tmp_path / "proj"
    (project / "src").mkdir(parents=True)
    (project / "src" / "billing.py").write_text(
        "def charge_invoice(invoice):\n    return invoice.total\n"
    )
    (project / "src" / "client.py").write_text(
        f'GITHUB_TOKEN = "{secret_values["github"]}"\ndef fetch_invoice():\n    pass\n'
    )
    (project / "src" / "settings.py").write_text(
        f'client_secret = "{secret_values["assigned"]}"\nINVOICE_LIMIT = 3\n'
    )
    (project / "src" / "aws.py").write_text(f'KEY_ID = "{secret_values["aws"]}"  # invoice\n')
    (project / "mysite").mkdir()
    (project / "mysite" / "settings.py").write_text(
        f'SECRET_KEY = "{secret_values["django"]}"\n'
        f'AWS_SECRET_ACCESS_KEY = "{secret_values["aws_secret"]}"\nALLOWED_INVOICE_HOSTS = []\n'
    )
    (project / ".env").write_text(f"INVOICE_API_KEY={secret_values['envfile']}\n")
    (project / "deploy.pem").write_text(f"-----BEGIN CERTIFICATE-----\n{secret_values['pem']}\n")
    key_header = "-----BEGIN " + "RSA PRIVATE KEY-----"
    (project / "src" / "keys.txt").write_text(f"{key_header}\n{secret_values['pem']}\ninvoice\n")
    (project / "src" / "placeholder.py").write_text(
        'password = "changeme"  # invoice placeholder\napi_key = "${API_KEY}"\n'
    )
    subprocess.run(["git", "init", "-q", str(project)], check=True)

    db = tmp_path / "state" / "context.db"
    engine = ContextEngine(database_path=db)
    try:
        engine.set_workspace(str(project), trusted=True)
        engine.sync_project()
        found = engine.retrieve(
            RetrieveRequest(
                query="where is `charge_invoice` and the invoice total", scopes=("project",)
            )
        )
        paths = {hit["path"] for hit in found["project"]}
        texts = " ".join(hit["text"] for hit in found["project"])
        status = engine.project_status()
    finally:
        engine.close()

    assert status["files"] >= 2  # the clean files are indexed...
    assert "src/billing.py" in paths or "src/placeholder.py" in paths
    for name in (
        "src/client.py",
        "src/settings.py",
        "src/aws.py",
        ".env",
        "deploy.pem",
        "mysite/settings.py",
    ):
        assert name not in paths  # ...the secret ones are not
    stored = _database_bytes(db)
    for value in secret_values.values():
        assert value not in texts
        assert value.encode() not in stored, value


def test_buffers_of_an_old_root_never_stand_for_files_of_a_new_one(tmp_path: Path) -> None:
    """Open-buffer texts are keyed by relative path: a re-root forgets them all."""
    first, second = tmp_path / "a", tmp_path / "b"
    for root in (first, second):
        (root / "src").mkdir(parents=True)
        (root / "src" / "app.py").write_text("def handler():\n    return 1\n")
    engine = ContextEngine(database_path=tmp_path / "state" / "context.db")
    try:
        engine.set_workspace(str(first), trusted=True)
        assert engine.set_live_text(str(first / "src" / "app.py"), "edited in a") == "src/app.py"
        engine.set_workspace(str(second), trusted=True)
        workspace = engine._workspace
        assert workspace is not None and workspace.live_text("src/app.py") is None
    finally:
        engine.close()
