"""A claim whose point reports the thread pools it runs under (the engine's thread limit test)."""

from __future__ import annotations

from attnlab.engine.protocol import Claim, Grid, Point, Result, Verdict


def _threads_run(point: Point) -> Result:
    import numpy  # noqa: F401 - its BLAS is the pool under test
    import torch
    from threadpoolctl import threadpool_info

    pools = threadpool_info()
    return Result(
        metrics={
            "torch_threads": torch.get_num_threads(),
            "pool_threads": max(i["num_threads"] for i in pools),
            "pools": len(pools),
        }
    )


CLAIMS = [
    Claim(
        id="test.threads",
        kind="identity",
        paper="A",
        statement="a point reports its thread pools",
        version=1,
        grids={"quick": Grid({"x": [0, 1]}), "full": Grid({"x": [0, 1]})},
        run=_threads_run,
        verdict=lambda rows: Verdict("holds", {}, "-", ""),
    )
]
