import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    # small dense problems: one thread avoids contention on shared CI cores (as the engine's workers do)
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
