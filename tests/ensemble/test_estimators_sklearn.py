"""NWHead and NWEnsemble against scikit-learn's own estimator checks, and the one tag they set."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.utils.estimator_checks import parametrize_with_checks

from attnlab.ensemble.estimators import NWEnsemble, NWHead


@parametrize_with_checks([NWHead(), NWEnsemble(), NWEnsemble(n_heads=3, weights="optimal", kernel="dot")])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def _regression_data():
    """The data of scikit-learn's check_regressors_train (make_regression, 10 features, 1 informative)."""
    from sklearn.datasets import make_regression
    from sklearn.preprocessing import StandardScaler, scale

    X, y = make_regression(n_samples=200, n_features=10, n_informative=1, bias=5.0, noise=20, random_state=42)
    return StandardScaler().fit_transform(X), scale(y)


def test_poor_score_tag_is_about_the_bandwidth_not_a_broken_fit():
    X, y = _regression_data()
    for est in (NWHead(), NWEnsemble()):
        assert est.__sklearn_tags__().regressor_tags.poor_score
        # the default smoother: R² well below the check's 0.5 but positive (better than the mean)
        assert 0.0 < clone(est).fit(X, y).score(X, y) < 0.5
    # a full-rank narrow kernel (d_k = d = 10, c = 3) puts nearly all weight on each point itself, so
    # the in-sample fit all but interpolates (measured 0.99985; neighbours keep a weight ~e^(-c² r²/2√d_k))
    assert NWEnsemble(d_k=10, c=3.0).fit(X, y).score(X, y) > 0.999


def test_project_messages_kept_through_sklearn_validation():
    X = np.random.default_rng(0).normal(size=(12, 3))
    y = X[:, 0]
    with pytest.raises(ValueError, match="y: expected 12 values"):
        NWHead().fit(X, y[:5])
    est = NWHead().fit(X, y)
    with pytest.raises(ValueError, match="3 features"):
        est.predict(X[:, :2])
    with pytest.raises(ValueError, match="1 sample"):
        NWHead().fit(X[:1], y[:1])
