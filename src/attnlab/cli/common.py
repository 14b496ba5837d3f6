"""Shared command-line plumbing: JSON output, logs on stderr, one-line errors, input checks, progress.

Every command takes ``--json``: it then prints exactly one strict-JSON object on stdout
(non-finite numbers become ``null`` and a ``note`` says which), and all logs go to stderr.
Bad input raises :class:`UsageError` (or a ``ValueError`` from a science function); ``main``
turns both into one line on stderr and exit status 2 (with ``--json``, also one
``{"error": {"argument", "expected", "got", "message"}}`` object on stdout).

Inputs are checked before any work starts: ranges and choices, output paths (an existing,
writable folder; a known figure format) and sizes against the memory available now
(:func:`check_memory`, "needs 307 GB, 24 GB available"). Work that can take more than a couple of
seconds reports progress through :class:`TaskProgress`: a rich bar on a terminal and, when stderr
is not a terminal (``make run > log 2>&1``), one log line every ~10 s with done/total, rate and ETA
(``ATTNLAB_PROGRESS_EVERY`` sets the interval in seconds).
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

from rich.console import Console

__all__ = [
    "UsageError",
    "TaskProgress",
    "LogTicker",
    "check_memory",
    "check_out_file",
    "check_out_folder",
    "shorten",
    "special_file",
    "check_seed",
    "error_fields",
    "format_bytes",
    "largest_factor",
    "err_console",
    "out_console",
    "emit_json",
    "strict_json",
    "JsonOpt",
    "check_device",
    "check_environment",
]

import typer

#: Logs, progress bars and human tables that must not pollute --json output go here.
err_console = Console(stderr=True)
#: Human output (tables) when --json is not given. Piped to a file or a CI log (no terminal to
#: ask), tables get 140 columns rather than rich's default 80, which would fold every cell.
out_console = Console(
    width=None if (sys.stdout is not None and sys.stdout.isatty()) or os.environ.get("COLUMNS") else 140
)

JsonOpt = typer.Option(False, "--json", help="Print exactly one strict-JSON object on stdout.")


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit status 2."""

    def __init__(self, argument: str, expected: str, given: Any):
        super().__init__(f"{argument}: expected {expected}, got {shorten(given)}")
        self.argument, self.expected, self.given = argument, expected, given


def shorten(value: Any, limit: int = 80) -> str:
    """``repr(value)``, cut in the middle when longer than ``limit`` (with its length), so that a
    refusal stays one readable line whatever was given."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[: limit - 24]}…{text[-12:]} ({len(text)} characters)"


_MESSAGE = re.compile(r"^(?P<argument>[^\s:][^:]*): expected (?P<expected>.*), got (?P<got>.*)$", re.S)


def error_fields(exc: BaseException | str) -> dict[str, Any]:
    """``{"argument", "expected", "got", "message"}`` of an error line ``ARG: expected X, got Y``.

    A :class:`UsageError` gives its fields directly; a science ``ValueError`` follows the same
    one-line convention and is parsed; anything else keeps only ``message`` (the others are None).
    """
    message = " ".join(str(exc).split())
    if isinstance(exc, UsageError):
        got = exc.given
        if not (got is None or isinstance(got, (str, int, float, bool))):
            got = str(got)
        return {"argument": exc.argument, "expected": exc.expected, "got": got, "message": message}
    m = _MESSAGE.match(message)
    if m is None:
        return {"argument": None, "expected": None, "got": None, "message": message}
    got = m["got"]
    if len(got) >= 2 and got[0] == got[-1] and got[0] in "'\"":
        got = got[1:-1]
    return {"argument": m["argument"], "expected": m["expected"], "got": got, "message": message}


#: Environment variables naming extra modules, and the attribute each module must define.
EXTRA_MODULE_VARS = {"ATTNLAB_EXTRA_CLAIMS": "CLAIMS", "ATTNLAB_EXTRA_FIGURES": "FIGURES"}


def check_environment() -> None:
    """The ``ATTNLAB_*`` variables a command reads, checked when it starts (:class:`UsageError` naming
    the variable): extra claim and figure modules importable and defining ``CLAIMS`` / ``FIGURES``,
    ``ATTNLAB_MEMORY_LIMIT`` a positive number of bytes."""
    import importlib

    for var, attr in EXTRA_MODULE_VARS.items():
        for name in os.environ.get(var, "").split(","):
            name = name.strip()
            if not name:
                continue
            expected = f"comma-separated importable modules that define {attr}"
            try:
                mod = importlib.import_module(name)
            except ImportError as e:
                raise UsageError(var, expected, f"{name} ({' '.join(str(e).split())})") from None
            if not hasattr(mod, attr):
                raise UsageError(var, expected, f"{name} (no {attr} in it)")
    if os.environ.get("ATTNLAB_MEMORY_LIMIT"):
        available_memory()


def format_bytes(n: float) -> str:
    """``307 GB``, ``16 TB``, ``512 MB``: decimal units, three significant digits at most."""
    for unit, size in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{int(n)} B"


def available_memory() -> int:
    """Bytes of memory available to a new allocation now (``ATTNLAB_MEMORY_LIMIT`` caps it, in bytes)."""
    import psutil

    avail = int(psutil.virtual_memory().available)
    cap = os.environ.get("ATTNLAB_MEMORY_LIMIT")
    if not cap:
        return avail
    try:
        limit = float(cap)
    except ValueError:
        limit = math.nan
    if not (math.isfinite(limit) and limit > 0):
        raise UsageError("ATTNLAB_MEMORY_LIMIT", "a positive number of bytes (e.g. 8e9)", cap)
    return min(avail, int(limit))


def check_memory(argument: str, given: Any, need_bytes: float, what: str = "") -> None:
    """:class:`UsageError` when ``need_bytes`` (an estimate made before allocating) exceeds what is free.

    The message says what the size would need and what is available, e.g.
    ``--d: expected a size that fits in memory (needs 307 GB, 24 GB available), got 100000000``.
    """
    avail = available_memory()
    if not math.isfinite(need_bytes) or need_bytes > avail:
        extra = f" for {what}" if what else ""
        raise UsageError(
            argument,
            f"a size that fits in memory (needs {format_bytes(need_bytes)}{extra}, "
            f"{format_bytes(avail)} available)",
            given,
        )


def largest_factor(*candidates: tuple[str, float, float]) -> tuple[str, float]:
    """(option, value) of the candidate ``(option, value, typical)`` furthest above its typical value:
    the option a size refusal names, so that ``--d 1000000`` is blamed on ``--d``, not ``--batch``."""
    best = max(candidates, key=lambda c: (c[1] / c[2]) if c[2] > 0 else c[1])
    return best[0], best[1]


#: Largest seed the store and torch's generators accept (a signed 64-bit integer).
SEED_MAX = 2**63 - 1


def check_seed(seed: int, argument: str = "--seed") -> int:
    """A non-negative seed below 2⁶³ (SQLite's and torch's integer range)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= SEED_MAX:
        raise UsageError(argument, f"an integer in [0, {SEED_MAX}]", seed)
    return seed


def check_out_file(argument: str, path: Path, suffixes: tuple[str, ...] = (), folder_name: str = "") -> Path:
    """An output file path that can be written, checked before any work (nothing is created here).

    Missing folders on the way are fine (the command creates them when it writes), but the nearest
    existing one must be a writable folder and ``path`` itself no folder. ``folder_name``: when
    ``path`` is an existing folder, write ``folder_name`` inside it instead of refusing.
    ``suffixes``: accepted extensions (e.g. ``(".png", ".svg", ".pdf")``).
    """
    path = Path(path)
    if path.is_dir():
        if not folder_name:
            raise UsageError(argument, "a file path (this is a folder)", str(path))
        path = path / folder_name
    if suffixes and path.suffix.lower() not in suffixes:
        raise UsageError(argument, f"a file name ending in {' or '.join(suffixes)}", str(path))
    check_out_folder(argument, path.parent, shown=path)
    kind = special_file(path)
    if kind:
        raise UsageError(argument, f"a regular file path (this is {kind}, which would block)", str(path))
    if path.exists() and not os.access(path, os.W_OK):
        raise UsageError(argument, "a path this user may write (permission denied)", str(path))
    return path


def special_file(path: Path) -> str:
    """``"a named pipe (FIFO)"`` or ``"a socket"`` for such a path (opening it blocks or fails), else ''."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError:
        return ""
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return ""


def check_out_folder(argument: str, folder: Path, shown: Path | None = None) -> Path:
    """A folder that exists and is writable, or can be created (its nearest existing ancestor is)."""
    folder = Path(folder)
    shown = folder if shown is None else shown
    probe = folder if str(folder) else Path(".")
    while not probe.exists():
        if probe.is_symlink() or probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise UsageError(argument, f"a path in a folder ({probe} is a file)", str(shown))
    if not probe.exists() or not _can_create_in(probe):
        raise UsageError(argument, f"a path this user may write ({probe} is not writable)", str(shown))
    return folder


def _can_create_in(folder: Path) -> bool:
    """Whether a file can be created in ``folder``: tried (and removed at once), since permission bits
    say nothing for root or for pseudo file systems such as /proc."""
    import tempfile

    if not os.access(folder, os.W_OK | os.X_OK):
        return False
    try:
        with tempfile.TemporaryFile(dir=folder, prefix=".attnlab-probe-"):
            return True
    except OSError:
        return False


def strict_json(obj: Any, _notes: list[str] | None = None, _path: str = "") -> Any:
    """Replace nan/inf by None (recording the path in ``_notes``) and numpy/torch scalars by floats."""
    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        np = None
    if isinstance(obj, dict):
        return {str(k): strict_json(v, _notes, f"{_path}.{k}" if _path else str(k)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict_json(v, _notes, f"{_path}[{i}]") for i, v in enumerate(obj)]
    if np is not None and isinstance(obj, np.ndarray):
        return strict_json(obj.tolist(), _notes, _path)
    if np is not None and isinstance(obj, np.generic):
        obj = obj.item()
    if hasattr(obj, "item") and hasattr(obj, "numel") and obj.numel() == 1:
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        if _notes is not None:
            _notes.append(f"{_path} is {obj} (written as null)")
        return None
    return obj


def emit_json(obj: dict[str, Any]) -> None:
    """Print one strict-JSON object on stdout; non-finite values become null plus a ``note``."""
    notes: list[str] = []
    clean = strict_json(obj, notes)
    if notes:
        prev = clean.get("note")
        clean["note"] = "; ".join(([prev] if prev else []) + notes)
    sys.stdout.write(json.dumps(clean, allow_nan=False) + "\n")
    sys.stdout.flush()


def check_device(device: str) -> str:
    """``cpu``, or a CUDA device (``cuda``, ``cuda:N``) available here; :class:`UsageError` otherwise."""
    if device == "cpu":
        return device
    if device == "cuda" or device.startswith("cuda:"):
        import torch

        idx = device.partition(":")[2]
        if torch.cuda.is_available() and (
            not idx or (idx.isdigit() and int(idx) < torch.cuda.device_count())
        ):
            return device
        raise UsageError("--device", "cpu or an available cuda device", device)
    raise UsageError("--device", "cpu, cuda or cuda:N", device)


def _progress_every() -> float:
    try:
        every = float(os.environ.get("ATTNLAB_PROGRESS_EVERY", "10"))
    except ValueError:
        every = 10.0
    return every if math.isfinite(every) and every > 0 else 10.0


def _duration(s: float) -> str:
    s = max(0.0, s)
    if s < 60:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60):02d} s"
    return f"{int(s // 3600)} h {int(s % 3600 // 60):02d} min"


class LogTicker:
    """One log line on stderr every ``every`` seconds while work runs (for logs, not terminals).

    Each line reads ``computing: 120/242 (50%), 3.1 points/s, ETA 39 s`` (or, without a total,
    ``solving: 30 s elapsed``). A daemon thread writes the lines, so a long step without any
    update still shows that the command is alive.
    """

    def __init__(
        self,
        description: str,
        total: float | None = None,
        unit: str = "steps",
        every: float = 0,
        eta: Any = None,
    ):
        self.description, self.total, self.unit = description, total, unit
        self.eta = eta  # a callable giving "ETA …" from the work's costs; default: from the rate
        self.every = every or _progress_every()
        self.done = 0.0
        self._t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="attnlab-progress", daemon=True)
        self._thread.start()

    def update(self, done: float | None = None, advance: float = 0, description: str | None = None) -> None:
        if done is not None:
            self.done = done
        self.done += advance
        if description is not None:
            self.description = description

    def line(self) -> str:
        elapsed = time.monotonic() - self._t0
        if not self.total:
            count = f", {self.done:g} {self.unit} done" if self.done else ""
            return f"{self.description}: {_duration(elapsed)} elapsed{count}"
        rate = self.done / elapsed if elapsed > 0 else 0.0
        if self.eta is not None:
            eta = self.eta()
        else:
            eta = "ETA " + (_duration((self.total - self.done) / rate) if rate > 0 else "unknown")
        pct = 100.0 * self.done / self.total
        return (
            f"{self.description}: {self.done:g}/{self.total:g} ({pct:.0f}%), {rate:.3g} {self.unit}/s, {eta}"
        )

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            err_console.print(self.line(), markup=False, highlight=False, soft_wrap=True)

    def close(self, final: bool = False) -> None:
        """Stop the lines; ``final``: write one last line with the totals."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(timeout=1.0)
        if final:
            err_console.print(self.line(), markup=False, highlight=False, soft_wrap=True)


class TaskProgress:
    """Progress of one long piece of work: a rich bar on a terminal, log lines (:class:`LogTicker`) off it.

    Use as a context manager; ``update(done=..., description=...)`` or ``advance()``. ``total=None``
    shows a spinner and the elapsed time (for work without a count, e.g. solving a fixed point).
    Nothing is drawn before ``__enter__``, so bad input fails with one line and no bar residue.
    """

    def __init__(self, description: str, total: float | None = None, unit: str = "steps"):
        self.description, self.total, self.unit = description, total, unit
        self._bar = None
        self._task = None
        self._ticker: LogTicker | None = None

    def __enter__(self) -> TaskProgress:
        if err_console.is_terminal:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            cols = [SpinnerColumn(), TextColumn("{task.description}")]
            if self.total:
                cols += [BarColumn(), MofNCompleteColumn(), TimeRemainingColumn()]
            self._bar = Progress(*cols, TimeElapsedColumn(), console=err_console, transient=True)
            self._bar.start()
            self._task = self._bar.add_task(self.description, total=self.total)
        else:
            self._ticker = LogTicker(self.description, self.total, self.unit)
        return self

    def update(self, done: float | None = None, description: str | None = None) -> None:
        if self._bar is not None:
            kw: dict[str, Any] = {} if description is None else {"description": description}
            self._bar.update(self._task, completed=done, **kw)
        if self._ticker is not None:
            self._ticker.update(done=done, description=description)

    def advance(self, n: float = 1) -> None:
        if self._bar is not None:
            self._bar.update(self._task, advance=n)
        if self._ticker is not None:
            self._ticker.update(advance=n)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        if self._ticker is not None:
            self._ticker.close()
            self._ticker = None
