"""The ``attnlab`` command line: one typer app, one module per area.

``main`` runs the app without click's standalone error handling so that every bad input becomes
exactly one line on stderr with exit status 2 (never a usage box or a traceback); set
``ATTNLAB_DEBUG=1`` to see tracebacks of unexpected errors.
"""

from __future__ import annotations

import os
import sys

import click
import typer

from attnlab import __version__
from attnlab.cli import ensemble as ensemble_cli
from attnlab.cli import flow as flow_cli
from attnlab.cli import highdim as highdim_cli
from attnlab.cli import results as results_cli
from attnlab.cli import runs
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


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app, map errors to one stderr line and an exit status."""
    try:
        rv = app(args=argv, prog_name="attnlab", standalone_mode=False)
        return int(rv or 0) if isinstance(rv, int) else 0
    except _exc("Exit") as e:
        return e.exit_code
    except _exc("Abort"):
        print("interrupted", file=sys.stderr)
        return 130
    except _exc("NoSuchOption") as e:
        print(f"error: {_one_line(e.format_message())} (see --help)", file=sys.stderr)
        return 2
    except _exc("UsageError") as e:
        msg = e.format_message()
        param = getattr(e, "param", None)
        if param is not None:
            opts = [o for o in (getattr(param, "opts", None) or []) if o.startswith("-")]
            name = opts[0] if opts else (getattr(param, "metavar", None) or str(param.name).upper())
            if isinstance(e, _exc("MissingParameter")):
                msg = f"{name}: expected a value, got nothing"
            elif isinstance(e, _exc("BadParameter")):
                msg = f"{name}: {e.message}"
        print(f"error: {_one_line(msg)}", file=sys.stderr)
        return 2
    except (UsageError, ValueError) as e:
        print(f"error: {_one_line(str(e))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - one line, unless debugging
        if os.environ.get("ATTNLAB_DEBUG"):
            raise
        print(
            f"internal error: {type(e).__name__}: {_one_line(str(e))} (ATTNLAB_DEBUG=1 for a traceback)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
