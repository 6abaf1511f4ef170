"""How a refused input must look to a user of `ferc` and `fe-run`."""

from __future__ import annotations

from click.testing import Result


def refused(result: Result) -> str:
    """Assert one red line on stderr, nothing on stdout, exit 2 and no traceback; return the line."""
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]
