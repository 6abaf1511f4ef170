"""Shell completion (click's): named queries and their parameters, the target's kernels and
toolchain versions. `chiplore completion bash|zsh|fish` prints the script that enables it.

Completion runs on every Tab: it reads the target (settings from the environment, no graph store),
never fails (an error completes nothing), and prints nothing of its own.
"""

from __future__ import annotations

from typing import Any

import click
from click.shell_completion import CompletionItem, get_completion_class

from chiplore import queries as named_queries
from chiplore.app import open_target
from chiplore.core.settings import Settings


def _target() -> Any:
    return open_target(Settings())


def query_names(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The named queries, each with its description."""
    try:
        return [CompletionItem(q.name, help=q.description) for q in named_queries.load_all().values()
                if q.name.startswith(incomplete)]  # fmt: skip
    except Exception:
        return []


def query_params(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """`NAME=` for each parameter of the named query already on the line."""
    try:
        named = named_queries.load_all().get(ctx.params.get("name") or "")
        if named is None:
            return []
        return [CompletionItem(f"{p.name}=", help=p.type + ("" if p.required else f", default {p.default}"))
                for p in named.params if p.name.startswith(incomplete)]  # fmt: skip
    except Exception:
        return []


def kernel_names(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The kernels the configured target offers, each with its short name."""
    try:
        return [CompletionItem(spec.name, help=spec.label or None) for spec in _target().kernels()
                if spec.name.startswith(incomplete)]  # fmt: skip
    except Exception:
        return []


def toolchain_versions(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The configured target's toolchain versions, oldest first."""
    try:
        return [CompletionItem(v) for v in _target().toolchains() if v.startswith(incomplete)]
    except Exception:
        return []


def completion_script(root: click.Command, shell: str, prog_name: str = "chiplore") -> str:
    """The script a shell sources to complete `prog_name` (click's, for bash, zsh or fish)."""
    kind = get_completion_class(shell)
    if kind is None:
        raise click.BadParameter(f"no completion for {shell!r}; bash, zsh and fish have one", param_hint="SHELL")
    variable = f"_{prog_name.replace('-', '_').upper()}_COMPLETE"
    return kind(root, {}, prog_name, variable).source()
