"""`python -m chiplore.cli`: the same as the `chiplore` console script."""

from chiplore.cli import run

run()
