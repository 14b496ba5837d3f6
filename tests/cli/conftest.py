"""In-process command line: ``main(argv)`` under typer's runner isolation (each CLI start in a
subprocess costs ~3 s; in process it costs milliseconds), in an empty working folder."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

TESTCLAIMS_DIR = Path(__file__).resolve().parents[1] / "engine"


@dataclasses.dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    def json(self) -> dict:
        text = self.stdout.strip()
        assert text and "\n" not in text, f"expected one line of JSON on stdout, got {self.stdout!r}"
        return json.loads(text)


@pytest.fixture
def cli(tmp_path, monkeypatch):
    """``cli(*argv, env=None) -> Result``: run ``attnlab ARGV`` in process, cwd = an empty tmp folder."""
    from attnlab.cli.main import main

    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("ATTNLAB_EXTRA_CLAIMS", "attnlab_testclaims")
    monkeypatch.setenv("ATTNLAB_EXTRA_FIGURES", "attnlab_testclaims")
    monkeypatch.setenv("COLUMNS", "160")
    monkeypatch.syspath_prepend(str(TESTCLAIMS_DIR))
    runner = CliRunner()

    def run(*argv: str, env: dict[str, str] | None = None) -> Result:
        with runner.isolation(env=env) as (out, err, _):
            code = main([str(a) for a in argv])
            sys.stdout.flush()
            sys.stderr.flush()
            return Result(code, out.getvalue().decode(), err.getvalue().decode())

    return run
