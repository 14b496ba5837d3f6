"""Joining a Ray cluster fails with one line that says what to do: a ``ray://`` address without Ray's
client, a head that refuses the token (recent Ray turns token authentication on by default), a head
that cannot be reached. A stand-in for ``ray`` raises what Ray raises in each case (a real head with
token authentication answers an unknown or missing token with ``ConnectionError`` after ~25 s)."""

from __future__ import annotations

import builtins

import pytest

from attnlab.engine.backends import _join_ray


class _Ray:
    def __init__(self, exc: BaseException | None):
        self.exc, self.calls = exc, []

    def init(self, **kw):
        self.calls.append(kw)
        if self.exc is not None:
            raise self.exc


class AuthenticationError(Exception):
    """What ``ray.exceptions.AuthenticationError`` is named."""


@pytest.mark.parametrize(
    "exc, needle",
    [
        (AuthenticationError("Token authentication is enabled but no token was found"), "RAY_AUTH_TOKEN"),
        (ConnectionError("Failed to connect to Ray cluster at 10.0.0.1:6379"), "RAY_AUTH_TOKEN"),
        (RuntimeError("InvalidAuthToken: the token does not match"), "ray get-auth-token"),
    ],
    ids=["no token", "refused or unreachable", "wrong token"],
)
def test_a_refused_join_says_what_to_do(exc, needle):
    with pytest.raises(ValueError, match="^RAY_ADDRESS: expected") as info:
        _join_ray(_Ray(exc), "10.0.0.1:6379", {"address": "10.0.0.1:6379"})
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_a_client_address_without_the_client_is_refused_before_connecting(monkeypatch):
    real_import = builtins.__import__

    def no_grpc(name, *a, **kw):
        if name == "grpc":
            raise ImportError("No module named 'grpc'")
        return real_import(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_grpc)
    ray = _Ray(None)
    with pytest.raises(ValueError, match=r"ray\[client\]"):
        _join_ray(ray, "ray://head:10001", {"address": "ray://head:10001"})
    assert ray.calls == []


def test_other_errors_and_a_good_join_pass_through():
    ray = _Ray(None)
    _join_ray(ray, "10.0.0.1:6379", {"address": "10.0.0.1:6379"})
    assert ray.calls == [{"address": "10.0.0.1:6379"}]
    with pytest.raises(MemoryError):
        _join_ray(_Ray(MemoryError("x")), None, {})


@pytest.mark.parametrize(
    "exc",
    [ConnectionError("Failed to connect to Ray cluster at 10.0.0.1:6379"), AuthenticationError("no token")],
    ids=["address", "token"],
)
def test_a_refused_join_writes_nothing(tmp_path, testclaims, monkeypatch, exc):
    """Ray is joined before the store is opened: a refusal leaves no store, lock or run row behind, and a
    store that was there keeps its runs."""
    from attnlab.engine import backends, run_claims

    class _Refusing(_Ray):
        def is_initialized(self):
            return False

    monkeypatch.setattr(backends, "_import_ray", lambda: _Refusing(exc))
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    c = testclaims.CLAIMS[0]
    with pytest.raises(ValueError, match="^RAY_ADDRESS: expected"):
        run_claims([c], out=tmp_path / "new", backend="ray", workers=1)
    assert not (tmp_path / "new").exists() or not any((tmp_path / "new").iterdir())
    run_claims([c], out=tmp_path / "old", backend="serial", workers=1)
    import sqlite3

    def runs() -> int:
        con = sqlite3.connect(tmp_path / "old" / "attnlab.sqlite")
        try:
            return con.execute("SELECT count(*) FROM runs").fetchone()[0]
        finally:
            con.close()

    before = runs()
    with pytest.raises(ValueError, match="^RAY_ADDRESS: expected"):
        run_claims([c], out=tmp_path / "old", backend="ray", workers=1, force=True)
    assert runs() == before
