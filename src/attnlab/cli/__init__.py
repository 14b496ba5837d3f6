"""The command line (typer): ``attnlab.cli.main:main``."""
