"""The ``attnlab`` command line: one typer app, one module per area.

``main`` runs the app without click's standalone error handling so that every bad input becomes
exactly one line on stderr with exit status 2 (never a usage box or a traceback); set
``ATTNLAB_DEBUG=1`` to see tracebacks of unexpected errors.
"""

from __future__ import annotations

import os
import re
import sys

import click
import typer

from attnlab import __version__
from attnlab.cli import claimtools, runs, stability
from attnlab.cli import ensemble as ensemble_cli
from attnlab.cli import flow as flow_cli
from attnlab.cli import highdim as highdim_cli
from attnlab.cli import results as results_cli
from attnlab.cli.common import UsageError
from attnlab.cli.inspect import inspect_command

try:  # recent typer vendors its own click; older ones use click itself
    from typer._click import exceptions as _tce
except ImportError:  # pragma: no cover
    _tce = click.exceptions


def _exc(name: str) -> tuple[type[BaseException], ...]:
    return tuple({getattr(click.exceptions, name), getattr(_tce, name, getattr(click.exceptions, name))})


app = typer.Typer(
    name="attnlab",
    help="attnlab: an executable laboratory for the theory of attention heads.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        print(f"attnlab {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version."
    ),
) -> None:
    """Verify the claims of three papers on attention heads, and inspect real models' heads."""


runs.claims_app.command("power")(claimtools.claims_power)
runs.claims_app.command("stability")(stability.claims_stability)
app.add_typer(runs.claims_app, name="claims")
app.command("reproduce")(runs.reproduce)
app.command("report")(runs.report)
app.add_typer(results_cli.app, name="results")

app.add_typer(ensemble_cli.app, name="ensemble")
app.add_typer(flow_cli.app, name="flow")
app.add_typer(highdim_cli.app, name="highdim")
app.command("inspect")(inspect_command)


def _one_line(msg: str) -> str:
    return " ".join(str(msg).split())


_PYDANTIC_VALUE = re.compile(r"^Input should be (?P<expected>[^,]+)")
_CLICK_VALUE = re.compile(r"^'?(?P<got>.*?)'? is not (?P<expected>.+?)\.?$")


def _fail(fields: dict, as_json: bool) -> int:
    """One line on stderr (and, with --json, one error object on stdout); exit status 2."""
    print(f"error: {fields['message']}", file=sys.stderr)
    if as_json:
        from attnlab.cli.common import emit_json

        emit_json({"error": fields})
    return 2


def _fields(argument: str, expected: str, got: object) -> dict:
    from attnlab.cli.common import shorten

    return {
        "argument": argument,
        "expected": expected,
        "got": got,
        "message": f"{argument}: expected {expected}, got {shorten(got)}",
    }


def _empty_value(args: list[str]) -> str | None:
    """The option given an empty value (``--out ""``, ``--only=``): refused rather than read as the
    current folder or as "every claim"."""
    for i, a in enumerate(args):
        if a == "--":
            return None
        if a.startswith("--") and "=" in a:
            name, value = a.split("=", 1)
            if not value.strip():
                return name
        elif a.startswith("--") and i + 1 < len(args) and not args[i + 1].strip():
            return a
    return None


def _huge_integer(args: list[str]) -> tuple[str, str] | None:
    """(option, text) of an option given an integer outside the 64-bit range, if any."""
    for i, a in enumerate(args):
        name, value = a.split("=", 1) if "=" in a else (a, args[i + 1] if i + 1 < len(args) else "")
        if not name.startswith("-"):
            continue
        digits = value.strip().lstrip("+-")
        if digits.isdigit() and abs(int(value)) >= 2**63:
            return name, value
    return None


def _value_of(option: str, args: list[str]) -> str | None:
    """The text given to ``option`` on the command line (``--opt VALUE`` or ``--opt=VALUE``)."""
    for i, a in enumerate(args):
        if a == option and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(option + "="):
            return a.split("=", 1)[1]
    return None


def _click_fields(e: BaseException, args: list[str]) -> dict:
    """Name the option a click usage error is about, as ``--opt: expected X, got Y``."""
    from attnlab.cli.common import error_fields

    msg = _one_line(e.format_message())
    if isinstance(e, _exc("NoSuchOption")):
        name = getattr(e, "option_name", None)
        return {
            "argument": name,
            "expected": "an option of this command",
            "got": name,
            "message": f"{msg} (see --help)",
        }
    param = getattr(e, "param", None)
    if param is None:
        if isinstance(e, _exc("UsageError")) and "No such command" in msg:
            return {"argument": "COMMAND", "expected": "a command (see --help)", "got": None, "message": msg}
        return error_fields(msg)
    opts = [o for o in (getattr(param, "opts", None) or []) if o.startswith("-")]
    name = opts[0] if opts else (getattr(param, "metavar", None) or str(param.name).upper())
    if isinstance(e, _exc("MissingParameter")):
        return {
            "argument": name,
            "expected": "a value",
            "got": None,
            "message": f"{name}: expected a value, got nothing",
        }
    detail = _one_line(getattr(e, "message", msg))
    m = _CLICK_VALUE.match(detail)
    if m is None and (m2 := _PYDANTIC_VALUE.match(detail)):  # typer's "Input should be ..." wording
        got = _value_of(name, args)
        return {
            "argument": name,
            "expected": m2["expected"],
            "got": got,
            "message": f"{name}: expected {m2['expected']}, got {got!r}",
        }
    if m:
        expected = m["expected"]
        return {
            "argument": name,
            "expected": expected,
            "got": m["got"],
            "message": f"{name}: expected {expected}, got {m['got']!r}",
        }
    return {"argument": name, "expected": detail, "got": None, "message": f"{name}: {detail}"}


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app, map errors to one stderr line and an exit status."""
    from attnlab.cli.common import error_fields

    args = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in args
    from attnlab.cli import signals

    signals.install()  # SIGTERM (kill, a scheduler) stops a run as Ctrl-C does
    closed = signals.stdout_problem()
    if closed is not None:
        return _fail(_fields("stdout", "an open standard output for the results", closed), False)
    empty = _empty_value(args)
    if empty is not None:
        return _fail(_fields(empty, "a non-empty value", ""), as_json)
    try:
        from attnlab.cli.common import check_environment

        check_environment()
        rv = app(args=args, prog_name="attnlab", standalone_mode=False)
        return int(rv or 0) if isinstance(rv, int) else 0
    except _exc("Exit") as e:
        return e.exit_code
    except _exc("Abort"):
        print("interrupted", file=sys.stderr)
        return signals.interrupt_status()
    except _exc("UsageError") as e:  # click's: unknown option, bad value, missing argument
        return _fail(_click_fields(e, args), as_json)
    except (UsageError, ValueError) as e:
        return _fail(error_fields(e), as_json)
    except OSError as e:
        if getattr(e, "filename", None) is None:
            raise_internal = e
        else:  # a user path that cannot be read or written: one line, status 2
            where = str(e.filename)
            if len(where) > 80:  # a long name is cut in the middle, with its length
                where = f"{where[:56]}…{where[-12:]} ({len(where)} characters)"
            why = _one_line(e.strerror or type(e).__name__).lower()
            fields = {"argument": where, "expected": "a path this command can use", "got": why}
            fields["message"] = f"{where}: expected a path this command can use, got {why}"
            return _fail(fields, as_json)
        return _internal(raise_internal)
    except KeyboardInterrupt as e:
        print("interrupted", file=sys.stderr)
        return signals.interrupt_status(e)
    except OverflowError as e:  # an integer option too large for the arithmetic that checks it
        huge = _huge_integer(args)
        if huge is None:
            return _internal(e)
        option, text = huge
        return _fail(
            _fields(option, "an integer below 2^63 (at most 19 digits)", text),
            as_json,
        )
    except Exception as e:  # noqa: BLE001 - one line, unless debugging
        return _internal(e)


def _internal(e: Exception) -> int:
    if os.environ.get("ATTNLAB_DEBUG"):
        raise e
    print(
        f"internal error: {type(e).__name__}: {_one_line(str(e))} (ATTNLAB_DEBUG=1 for a traceback)",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
