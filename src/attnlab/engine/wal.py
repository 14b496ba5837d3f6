"""The check of a store's write-ahead log (``attnlab.sqlite-wal``) before the store is opened.

SQLite reads the WAL's frames up to the last one whose checksum chain holds and silently ignores the
rest: a WAL truncated by a copy, a full disk or a broken transfer is read as "no newer points", and
the next writer checkpoints that reading over the points it lost. :func:`check_wal` reads the log
itself (header, frame sizes, the checksum chain of every frame) and says what is wrong, so the store
is refused with a recovery hint instead of being read as empty.

Format (https://sqlite.org/fileformat2.html#walformat): a 32-byte header (magic, version, page size,
checkpoint sequence, two salts, a checksum of the first 24 bytes), then frames of a 24-byte header
(page number, database size after commit or 0, the two salts, a running checksum) and one page.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

__all__ = ["WalReport", "check_wal", "wal_problem", "writer_active"]

_MAGIC = (0x377F0682, 0x377F0683)
_HEADER = 32
_FRAME_HEADER = 24
_M32 = 0xFFFFFFFF


@dataclass(frozen=True)
class WalReport:
    """What the log holds: valid frames, committed transactions, and the problem if there is one."""

    size: int
    frames: int = 0
    valid: int = 0
    commits: int = 0
    problem: str = ""


def _checksum(data: bytes, big: bool, s0: int = 0, s1: int = 0) -> tuple[int, int]:
    import numpy as np

    words = np.frombuffer(data, dtype=">u4" if big else "<u4").astype(np.uint64)
    x0, x1 = words[0::2].tolist(), words[1::2].tolist()
    for a, b in zip(x0, x1):
        s0 = (s0 + a + s1) & _M32
        s1 = (s1 + b + s0) & _M32
    return s0, s1


def check_wal(path: str | Path) -> WalReport:
    """Read ``path`` (a ``-wal`` file) and report; ``problem`` is '' for a sound log (or none at all)."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        return WalReport(0)
    size = len(data)
    if size == 0:
        return WalReport(0)
    if size < _HEADER:
        return WalReport(size, problem=f"{size} bytes, shorter than the 32-byte header")
    magic, version, page, _seq, salt1, salt2, c1, c2 = struct.unpack(">8I", data[:_HEADER])
    if magic not in _MAGIC or version != 3007000:
        return WalReport(size, problem="no write-ahead-log header (wrong magic number or version)")
    if page < 512 or page > 65536 or page & (page - 1):
        return WalReport(size, problem=f"a header with an impossible page size {page}")
    big = bool(magic & 1)
    if _checksum(data[:24], big) != (c1, c2):
        return WalReport(size, problem="a header whose checksum does not match")
    frame = _FRAME_HEADER + page
    frames, rest = divmod(size - _HEADER, frame)
    if rest:
        return WalReport(
            size, frames, problem=f"{size} bytes: {frames} whole frames and a cut one of {rest} bytes"
        )
    s = (c1, c2)
    valid = commits = 0
    last_commit = True
    for i in range(frames):
        off = _HEADER + i * frame
        head = data[off : off + _FRAME_HEADER]
        _pgno, db_size, f1, f2, k1, k2 = struct.unpack(">6I", head)
        if (f1, f2) != (salt1, salt2):
            break
        s2 = _checksum(head[:8], big, *s)
        s2 = _checksum(data[off + _FRAME_HEADER : off + frame], big, *s2)
        if s2 != (k1, k2):
            break
        s = s2
        valid += 1
        last_commit = db_size != 0
        commits += last_commit
    if frames and not valid:
        return WalReport(size, frames, problem=f"{frames} frames, none of which passes its checksum")
    if valid == frames and not last_commit:
        return WalReport(
            size, frames, valid, commits, problem="a log that ends inside a transaction (cut after a frame)"
        )
    return WalReport(size, frames, valid, commits)


def writer_active(db: Path) -> bool:
    """Whether a run holds the store's lock now (its WAL is then in use, not damaged)."""
    lock = db.parent / "attnlab.lock"
    if not lock.exists():
        return False
    import fcntl

    try:
        with open(lock) as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
    except BlockingIOError:
        return True
    except OSError:
        return False
    return False


def wal_problem(db: Path) -> str | None:
    """The refusal line for store ``db`` whose write-ahead log is damaged or cut (None when it is sound,
    absent, or in use by a running writer)."""
    wal = db.with_name(db.name + "-wal")
    if not wal.exists() or writer_active(db):
        return None
    report = check_wal(wal)
    if not report.problem:
        return None
    return (
        f"store: the write-ahead log {str(wal)!r} is damaged or truncated ({report.problem}); it holds "
        f"points not yet in {db.name}, so the store was left as it is and not read. Restore both files "
        f"from a copy, or move {wal.name} and {db.name}-shm aside to use the store without the points "
        "the log held (a rerun recomputes them)"
    )
