"""One CPU thread for the dynamics tests: their tensors are small, and on a shared 2-core machine
thread synchronisation costs more than it saves (the claim workers also run with one thread)."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(prev)
