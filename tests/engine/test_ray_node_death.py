"""On Ray, a worker node that dies mid-run loses no finished point and the run completes."""

from __future__ import annotations

import sqlite3
import threading

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_a_dying_node_loses_nothing_and_the_run_completes(tmp_path, testclaims, monkeypatch):
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    from attnlab.engine import run_claims

    # two one-CPU nodes with small object stores, in this machine
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "object_store_memory": 80 * 2**20})
    doomed = cluster.add_node(num_cpus=1, object_store_memory=80 * 2**20)
    cluster.wait_for_nodes()
    monkeypatch.setenv("RAY_ADDRESS", cluster.address)
    c = testclaims.CLAIMS[0]
    finished: list[str] = []
    killed = threading.Event()

    def progress(event, payload):
        if event == "point":
            finished.append(payload.point_id)
            if len(finished) == 2 and not killed.is_set():
                killed.set()
                cluster.remove_node(doomed)  # the node dies with its running task

    try:
        s = run_claims(
            [c],
            out=tmp_path,
            backend="ray",
            workers=2,
            threads=1,
            overrides={c.id: {"sleep": 1.0}},
            progress=progress,
        )
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()
    assert killed.is_set(), "the node was never removed: the test did not test anything"
    assert s.computed == 8 and s.failed == 0
    con = sqlite3.connect(tmp_path / "attnlab.sqlite")
    stored = {r[0] for r in con.execute("SELECT point_id FROM points WHERE status = 'ok'")}
    assert set(finished) <= stored and len(stored) == 8
