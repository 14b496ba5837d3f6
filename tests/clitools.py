"""Helpers to run the ``attnlab`` command line in a subprocess and parse its JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

TESTCLAIMS_DIR = Path(__file__).resolve().parent / "engine"


def cli_env(extra_claims: bool = True) -> dict[str, str]:
    env = dict(os.environ)
    if extra_claims:
        env["ATTNLAB_EXTRA_CLAIMS"] = "attnlab_testclaims"
        env["ATTNLAB_EXTRA_FIGURES"] = "attnlab_testclaims"
        env["PYTHONPATH"] = os.pathsep.join([str(TESTCLAIMS_DIR), env.get("PYTHONPATH", "")])
    env.setdefault("COLUMNS", "160")
    return env


def run_cli(*args: str, extra_claims: bool = True, timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    """Run ``attnlab ARGS`` in a fresh interpreter, capturing stdout and stderr."""
    return subprocess.run(
        [sys.executable, "-m", "attnlab.cli.main", *args],
        capture_output=True,
        text=True,
        env=cli_env(extra_claims),
        timeout=timeout,
        **kw,
    )


def parse_json(stdout: str) -> dict:
    """Exactly one strict-JSON object on stdout."""
    text = stdout.strip()
    assert text, "no output on stdout"
    assert "\n" not in text, f"more than one line on stdout: {text[:200]!r}"

    def no_const(c):
        raise AssertionError(f"non-strict JSON constant {c}")

    return json.loads(text, parse_constant=no_const)
