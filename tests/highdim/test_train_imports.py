"""The training path's imports: ``attnlab.highdim.train`` loads neither scipy nor the state evolution.

A fresh interpreter (the modules already imported by the test session would hide an eager import) imports
the training path and reports which of the heavy modules it loaded; the same detector, run after importing
the state evolution, must see them (otherwise the first check could not fail).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

# modules the training path must not load: scipy (L-BFGS imports it when it runs) and the state evolution's
# solver with its quadrature
HEAVY = (
    "scipy",
    "attnlab.highdim.state_evolution",
    "attnlab.highdim.fixed_point",
    "attnlab.highdim.channel",
    "attnlab.highdim.quadrature",
)

_PROBE = """
import json, sys
{imports}
import attnlab.highdim as hd
ok = callable(hd.train_erm) and callable(hd.TrainConfig.published)  # the public names still resolve
print(json.dumps({{"loaded": [m for m in {heavy!r} if m in sys.modules], "api": ok}}))
"""


def _probe(imports: str) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    out = subprocess.run(
        [sys.executable, "-c", _PROBE.format(imports=imports, heavy=HEAVY)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_training_path_loads_no_scipy_nor_state_evolution():
    got = _probe(
        "from attnlab.core.seeding import derive_seed, generator\n"
        "from attnlab.highdim.data import Dataset\n"
        "from attnlab.highdim.train import TrainConfig, train_erm"
    )
    assert got["loaded"] == [], got
    assert got["api"]


def test_detector_sees_the_state_evolution_when_it_is_imported():
    # the control: the same probe after importing the state evolution reports its modules
    got = _probe("import attnlab.highdim.train\nimport attnlab.highdim.state_evolution")
    assert "attnlab.highdim.state_evolution" in got["loaded"]
    assert "attnlab.highdim.quadrature" in got["loaded"]
    assert got["api"]
