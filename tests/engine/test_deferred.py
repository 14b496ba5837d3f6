"""Interrupts held over a point being stored (attnlab.engine.deferred)."""

from __future__ import annotations

import gc
import os
import signal
import threading
import zipfile

import numpy as np
import pytest

from attnlab.engine import Store, run_claims
from attnlab.engine.deferred import interrupts_deferred
from attnlab.engine.records import pack_arrays, unpack_array


@pytest.fixture
def ctrl_c():
    """SIGINT raising KeyboardInterrupt, as in a terminal: a suite started in the background by a
    non-interactive shell (as CI starts it) inherits SIGINT ignored, and Python then installs no handler."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_sigint_in_the_block_is_raised_after_it(ctrl_c):
    # the block runs to its end; the interrupt comes right after, once for two signals, and the handler in
    # place before the block is back
    before = signal.getsignal(signal.SIGINT)
    done = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts_deferred():
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)
            done.append(1)
    assert done == [1]
    assert signal.getsignal(signal.SIGINT) is before


def test_sigterm_reaches_its_own_handler_after_the_block():
    seen = []

    class Stop(Exception):
        pass

    def on_term(signum, frame):
        seen.append(signum)
        raise Stop

    before = signal.signal(signal.SIGTERM, on_term)
    try:
        with pytest.raises(Stop):
            with interrupts_deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                assert seen == []  # held
        assert seen == [signal.SIGTERM]
        assert signal.getsignal(signal.SIGTERM) is on_term
    finally:
        signal.signal(signal.SIGTERM, before)


def test_no_signal_no_change_and_other_threads_run_the_block_as_it_is():
    with interrupts_deferred():
        x = 1
    assert x == 1


def test_an_ignored_sigint_stays_ignored():
    # where SIGINT was ignored before the block (a background job), one that arrives in it is dropped after it
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with interrupts_deferred():
            os.kill(os.getpid(), signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)
    out = []

    def work():
        with interrupts_deferred():  # signal.signal would raise ValueError here
            out.append(threading.current_thread().name)

    t = threading.Thread(target=work, name="not-main")
    t.start()
    t.join()
    assert out == ["not-main"]


def _interrupt_inside_a_zip_write(monkeypatch):
    # a planted Ctrl-C at the moment the zip archive closes the array's entry: the timing at which a real one
    # left the archive's writing handle open
    real = zipfile._ZipWriteFile.close

    def close(self):
        monkeypatch.setattr(zipfile._ZipWriteFile, "close", real)  # once
        os.kill(os.getpid(), signal.SIGINT)
        return real(self)

    monkeypatch.setattr(zipfile._ZipWriteFile, "close", close)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_an_interrupt_inside_savez_is_an_interrupt_not_a_value_error(monkeypatch, ctrl_c):
    # without the deferral the archive's cleanup replaces the interrupt with ValueError (the run then ended as
    # a one-line error, exit status 2); with it the arrays are packed whole and the interrupt follows
    _interrupt_inside_a_zip_write(monkeypatch)
    caught = None
    try:
        pack_arrays({"c": np.arange(100.0)})
    except ValueError as err:
        caught = (str(err), type(err.__context__))
    gc.collect()  # the half-written archive complains again when collected: here, under this test's filter
    assert caught is not None and "open writing handle" in caught[0] and caught[1] is KeyboardInterrupt
    _interrupt_inside_a_zip_write(monkeypatch)
    packed = {}
    with pytest.raises(KeyboardInterrupt):
        with interrupts_deferred():
            packed = pack_arrays({"c": np.arange(100.0)})
    assert np.array_equal(unpack_array(packed["c"]), np.arange(100.0))


def test_a_run_interrupted_while_storing_a_point_stops_as_interrupted(
    tmp_path, monkeypatch, testclaims, ctrl_c
):
    # the same planted interrupt while the runner stores the first point (serial backend): run_claims raises
    # KeyboardInterrupt, that point is stored whole, and the rest are not computed
    c = testclaims.CLAIMS[0]
    _interrupt_inside_a_zip_write(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        run_claims([c], out=tmp_path, backend="serial", threads=1)
    with Store(tmp_path / "attnlab.sqlite") as s:
        kept = s.all_points(c.id)
    assert len(kept) == 1 and kept[0]["status"] == "ok"
