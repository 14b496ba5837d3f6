"""core.validation.all_finite: one reduction where it can, element by element where the sum is not finite."""

import pytest
import torch

from attnlab.core.validation import all_finite, check_tensor


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
def test_all_finite_against_isfinite(dtype) -> None:
    big = torch.finfo(dtype).max
    cases = [
        torch.zeros(0, dtype=dtype),
        torch.randn(5, 7).to(dtype),
        torch.full((4,), big, dtype=dtype),  # finite values whose sum overflows: still finite
        torch.tensor([big, -big, big], dtype=dtype),
    ]
    for bad in (float("nan"), float("inf"), float("-inf")):
        x = torch.randn(3, 4).to(dtype)
        x[1, 2] = bad
        cases.append(x)
    both = torch.randn(6).to(dtype)
    both[0], both[1] = float("inf"), float("-inf")  # their sum is nan
    cases.append(both)
    for x in cases:
        assert all_finite(x) == bool(torch.isfinite(x).all()), x  # the element-wise check is the reference


def test_check_tensor_refuses_nan_and_keeps_overflowing_sums() -> None:
    check_tensor("w", torch.full((3,), 1e308, dtype=torch.float64))
    with pytest.raises(ValueError, match="w: expected finite values"):
        check_tensor("w", torch.tensor([1.0, float("nan")]))
