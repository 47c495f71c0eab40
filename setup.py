"""Build-time metadata of the ds4-lsp adapter that pyproject.toml cannot state statically.

The adapter and the core are released in lockstep: their one version is written in
core/ds4_core/__init__.py alone. This file reads it (as text, importing nothing) and gives the
adapter that version and an exact `ds4-context-core==<version>` requirement. RELEASING.md
describes the bump; tests/core/test_version_lockstep.py fails when anything drifts.
"""

import re
from pathlib import Path

from setuptools import setup

_CORE_INIT = Path(__file__).resolve().parent / "core" / "ds4_core" / "__init__.py"
_match = re.search(r'^__version__ = "([^"]+)"$', _CORE_INIT.read_text(encoding="utf-8"), re.M)
if _match is None:
    raise SystemExit(f"no __version__ line in {_CORE_INIT}")
VERSION = _match.group(1)

setup(
    version=VERSION,
    install_requires=[
        f"ds4-context-core=={VERSION}",
        "pygls>=2.1,<3",
        "lsprotocol",
        "cattrs",
        "peewee>=4.5",
        "pathspec>=1.0",
    ],
)
