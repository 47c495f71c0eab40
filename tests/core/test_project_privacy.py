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
        "openai": "sk" + "-proj-" + "Hq4Tz8Lw2Nc6" * 8,
        "anthropic": "sk" + "-ant-api03-" + "Pb3Kx7Vm1Qr5" * 8 + "AA",
        "github_app": "gh" + "s_" + "Wd2Fy6Jn0Ls4" * 3,
        "npm": "np" + "m_" + "Rg5Uc9Ye3Ab7" * 3,
        "azure": "Qm7Xb2Vn9Lk4/Tz8+" * 5 + "Ab==",
        "comment_password": "hunt" + "er9Qz",
        "git_credentials": "gitcred" + "Xy7Wv3",
        "pgpass": "pgpass" + "Zq8Rt4",
        "htpasswd": "$apr1$" + "Mx3Ne7Pq$" + "Lc5Vb1Kd9Gh3Jf7Ws2Yt6Ua",
        "shadow": "$6$" + "Nq2Wx8$" + "Hb4Zm6Pk1Rv9Tc3Lj7Yf5Sd2Gx8" * 3,
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
    (project / "src" / "ai.py").write_text(
        f'OPENAI = "{secret_values["openai"]}"\nANTHROPIC = "{secret_values["anthropic"]}"\n'
        "def invoice_summary():\n    pass\n"
    )
    (project / "src" / "ci.py").write_text(
        f'APP_TOKEN = "{secret_values["github_app"]}"  # invoice bot\n'
        f'NPM = "{secret_values["npm"]}"\n'
    )
    (project / "src" / "storage.py").write_text(
        "CONN = 'DefaultEndpointsProtocol=https;AccountName=invoices;"
        "Account"
        f"Key={secret_values['azure']};EndpointSuffix=core.windows.net'\n"
    )
    (project / "src" / "db.py").write_text(
        f"# password: {secret_values['comment_password']}\ndef invoice_db():\n    pass\n"
    )
    (project / ".git-credentials").write_text(
        f"https://invoice-bot:{secret_values['git_credentials']}@git.internal\n"
    )
    (project / ".pgpass").write_text(f"db:5432:invoices:app:{secret_values['pgpass']}\n")
    (project / "www").mkdir()
    (project / "www" / ".htpasswd").write_text(f"invoice:{secret_values['htpasswd']}\n")
    (project / "etc").mkdir()
    (project / "etc" / "shadow").write_text(
        f"invoice:{secret_values['shadow']}:19700:0:99999:7:::\n"
    )
    (project / "etc" / "shadow.bak.txt").write_text(
        f"invoice:{secret_values['shadow']}:19700:0:99999:7:::\n"
    )
    (project / "src" / "placeholder.py").write_text(
        'password = "changeme"  # invoice placeholder\napi_key = "${API_KEY}"\n'
    )
    subprocess.run(["git", "init", "-q", str(project)], check=True)

    db = tmp_path / "state" / "context.db"
    engine = ContextEngine(database_path=db)
    try:
        engine.project.set_root(str(project), trusted=True)
        engine.project.sync()
        found = engine.retrieve(
            RetrieveRequest(
                query="where is `charge_invoice` and the invoice total", scopes=("project",)
            )
        ).to_wire()
        paths = {hit["path"] for hit in found["project"]}
        texts = " ".join(hit["text"] for hit in found["project"])
        status = engine.project.status().to_wire()
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
        "src/ai.py",
        "src/ci.py",
        "src/storage.py",
        "src/db.py",
        ".git-credentials",
        ".pgpass",
        "www/.htpasswd",
        "etc/shadow",
        "etc/shadow.bak.txt",
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
        engine.project.set_root(str(first), trusted=True)
        relative = engine.project.set_live_text(str(first / "src" / "app.py"), "edited in a")
        assert relative == "src/app.py"
        engine.project.set_root(str(second), trusted=True)
        workspace = engine.project.workspace
        assert workspace is not None and workspace.live_text("src/app.py") is None
    finally:
        engine.close()


def test_credentials_under_other_names_and_formats_are_never_quoted(tmp_path: Path) -> None:
    """A new-user trial found these quoted verbatim by `ds4 retrieve --scope project` in a
    trusted folder that is not a Git repository: a PostgreSQL password file named
    `pgpass.conf`, a `.netrc` backup, an undotted `htpasswd` with a `{SHA}` hash, an Azure
    connection string written `AccountKey = ...`, and passwords in comments (`# pass:`,
    `# admin password for prod:`). None is indexed now, and a README whose keys are
    placeholders still is."""
    import base64
    import json
    import os
    import sys

    word = "Tr0ub4dor" + "Quokka"
    azure_key = base64.b64encode(bytes(range(40, 106))).decode()[:86] + "=="
    secrets = {
        "pgpass.conf": ("db.internal:5432:app:appuser:" + word + "9", word + "9"),
        "backup/.netrc.bak": (
            "machine api.internal.net login alice password " + word + "8",
            word + "8",
        ),
        "htpasswd": ("quokkaht:{" + "SHA}ufKssJ/Sk+WzDNhY7AGbX6lTiDY=", "ufKssJ/Sk+Wz"),
        "azure.py": ('conn = "AccountName=acme; Account' + f'Key = {azure_key}"', azure_key),
        "notes.py": ("# pass: " + word + "7\n# admin pass" + "word for prod: " + word + "6", word),
    }
    workspace = tmp_path / "ws"
    for name, (content, _) in secrets.items():
        path = workspace / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{content}\n# the ledger service\n")
    (workspace / "README.md").write_text(
        "# ledger\n\n```sh\nANTHROPIC_API_KEY=sk" + "-ant-api03-...\n"
        "OPENAI_API_KEY=sk" + "-proj-abc123...\n```\n"
        "token = 'REPLACE" + "_ME_WITH_TOKEN'  # the ledger service\n"
    )
    db = tmp_path / "context.db"
    environ = {k: v for k, v in os.environ.items() if k != "DS4_DB"}
    done = subprocess.run(
        [sys.executable, "-m", "ds4_core.cli", "--db", str(db), "retrieve", "--workspace",
         str(workspace), "--trust", "--scope", "project", "--json", "the ledger service"],
        capture_output=True, env=environ, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    result = json.loads(done.stdout)
    paths = {hit["path"] for hit in result["project"]}
    assert "README.md" in paths  # placeholders keep a file indexed
    assert not paths & set(secrets), paths
    stored = _database_bytes(db)
    for _, value in secrets.values():
        assert value not in done.stdout.decode()
        assert value.encode() not in stored, value
