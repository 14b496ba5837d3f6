"""Every script in examples/ runs through the public API and writes its figure (as CI runs them)."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


def test_there_are_examples_for_every_area():
    names = {p.stem for p in EXAMPLES}
    assert {"hdi_null", "mse_decomposition", "flow_energy", "highdim_spectrum"} <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs_and_writes_its_figure(path, tmp_path, monkeypatch, capsys):
    text = path.read_text(encoding="utf-8")
    # jupytext percent format: a markdown cell first, then code cells
    assert text.startswith("# %% [markdown]\n# # "), "an example opens with a markdown title cell"
    assert text.count("\n# %%\n") >= 2
    # it cites the theory page it illustrates, and that page exists
    cited = re.findall(r"docs/(\w+\.md)", text)
    assert cited and all((ROOT / "docs" / c).is_file() for c in cited)
    assert "attnlab._" not in text and "from attnlab.cli" not in text  # the public API only
    monkeypatch.setenv("ATTNLAB_EXAMPLES_OUT", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    runpy.run_path(str(path), run_name="__main__")
    figure = tmp_path / f"{path.stem}.png"
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"figure: {figure}" in capsys.readouterr().out
