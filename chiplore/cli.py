"""The `chiplore` command line: init, status, learn, optimize, tree, toolchain, query, cypher, db check."""

from __future__ import annotations

import functools
import logging
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn
from rich.table import Table
from rich.tree import Tree

import queries as named_queries
from agents.llm.config import LLMConfig
from agents.loop import DEFAULT_BUDGET_S as OPTIMIZE_BUDGET_S
from agents.loop import PATIENCE, TARGET_RATIO, unfinished
from agents.loop import optimize as optimize_kernels
from agents.upgrade import UpgradeSummary
from agents.upgrade import upgrade as upgrade_toolchain
from chiplore import __version__
from chiplore.app import App, open_target
from chiplore.core.clock import utc_now
from chiplore.core.errors import ChiploreError, ConfigError
from chiplore.core.settings import Settings
from chiplore.core.target import Target
from chiplore.output import print_records, to_json
from ingest.learn import DEFAULT_BUDGET_S
from ingest.learn import learn as learn_chip
from kg.models import Activity, DesignNode
from kg.repo.knowledge import record_activity
from kg.repo.overview import overview
from kg.repo.progress import KernelProgress, design_tree, kernel_progress
from kg.repo.targets import active_toolchain, register_target, toolchains
from kg.schema import LATEST_VERSION, ensure_schema, schema_version
from kg.store import GraphStore

F = TypeVar("F", bound=Callable[..., Any])

console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)


class Context:
    def __init__(self, debug: bool) -> None:
        self.debug = debug


def store_options(command: F) -> F:
    """The options every command takes to choose and locate the graph store."""

    @click.option(
        "--data-dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help="Embedded store location [env CHIPLORE_DATA_DIR; default: the user data dir].",
    )
    @click.option(
        "--store",
        type=click.Choice(["embedded", "neo4j"]),
        default=None,
        help="Graph backend [env CHIPLORE_STORE; default: embedded].",
    )
    @functools.wraps(command)
    def wrapper(*args: Any, data_dir: Path | None, store: str | None, **kwargs: Any) -> Any:
        overrides: dict[str, Any] = {}
        if data_dir is not None:
            overrides["data_dir"] = data_dir
        if store is not None:
            overrides["store"] = store
        try:
            settings = Settings(**overrides)
        except ValidationError as error:
            raise ConfigError(f"invalid settings: {error.errors()[0]['loc']}: {error.errors()[0]['msg']}") from None
        return command(*args, app=App(settings), **kwargs)

    return wrapper  # type: ignore[return-value]


def parse_params(pairs: tuple[str, ...]) -> dict[str, str]:
    params: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"expected NAME=VALUE, got {pair!r}", param_hint="-p")
        params[name] = value
    return params


class ChiploreGroup(click.Group):
    """Turns chiplore errors into one red line and a non-zero exit; tracebacks only with --debug."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ChiploreError as error:
            context = ctx.find_object(Context)
            if context is not None and context.debug:
                raise
            err_console.print(f"[red]error:[/red] {error}", highlight=False, soft_wrap=True)
            sys.exit(1)


@click.group(cls=ChiploreGroup)
@click.version_option(__version__, prog_name="chiplore")
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logs.")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """chiplore learns an unfamiliar AI accelerator and optimizes kernels for it."""
    ctx.obj = Context(debug)
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if not debug:
        # The driver logs each failed connection attempt; our own error line says it once.
        logging.getLogger("neo4j").setLevel(logging.CRITICAL)


@main.command()
@store_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def init(app: App, as_json: bool) -> None:
    """Set up the graph schema and register the target with its toolchains."""
    target = app.target()
    with app.open_store() as store:
        report = ensure_schema(store)
        register_target(
            store,
            target.name,
            target.toolchain_versions,
            target.default_toolchain,
            target.description,
        )
        state = overview(store, target.name)
    result = {
        "backend": app.settings.store,
        "schema_version": report.version_after,
        "migrations_applied": report.applied,
        "target": target.name,
        "toolchains": [t["version"] for t in state.toolchains],
        "active_toolchain": state.active_toolchain,
    }
    if as_json:
        click.echo(to_json(result))
        return
    console.print(
        f"[green]ready[/green] {app.settings.store} store, schema v{report.version_after}"
        f" ({len(report.applied)} migration{'s' if len(report.applied) != 1 else ''} applied); "
        f"target [bold]{target.name}[/bold], toolchains {', '.join(result['toolchains'])}, "
        f"active {state.active_toolchain}"
    )


@main.command()
@store_options
@click.option("--graph", "graph_only", is_flag=True, help="The graph's overview (target, toolchains, counts) only.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: a list with one object per kernel.")
def status(app: App, graph_only: bool, as_json: bool) -> None:
    """Each kernel's best against its baseline and bound; the graph's target, toolchains and counts."""
    target = app.settings.target
    with app.open_store() as store:
        info = store.server_info()
        state = overview(store, target)
        progress = kernel_progress(store)
    if as_json and graph_only:
        click.echo(to_json({"store": info.model_dump(), **state.model_dump()}))
        return
    if as_json:  # one object per kernel: what a script comparing runs needs
        click.echo(to_json([k.model_dump() for k in progress]))
        return
    console.print(f"[bold]{info.backend}[/bold] store at {info.address} ({info.server_version})")
    if not state.registered:
        console.print(f"[yellow]target {target} is not registered: run `chiplore init`[/yellow]")
    else:
        versions = ", ".join(
            f"[bold]{t['version']}[/bold]" if t["status"] == "active" else t["version"] for t in state.toolchains
        )
        console.print(f"target {target}, toolchains {versions} (active in bold), schema v{state.schema_version}")
    counts = Table(title="graph", show_header=True)
    counts.add_column("label")
    counts.add_column("nodes", justify="right")
    for label, count in state.counts.items():
        if count:
            counts.add_row(label, str(count))
    if counts.row_count:
        console.print(counts)
    if progress:
        console.print(progress_table(progress))
    console.print(f"device time spent: {state.device_s:.1f} s")


POLICIES = ("builtin", "llm")


def llm_options(command: F) -> F:
    """The model options of the LLM roles, gathered into one `llm: LLMConfig` argument."""

    @click.option("--model", default=LLMConfig().model, show_default=True,
                  help="The LLM, as LangChain's provider:model (e.g. openai:gpt-5).")  # fmt: skip
    @click.option("--base-url", default=None, help="An OpenAI-compatible server (vLLM, llama.cpp, Ollama).")
    @click.option("--temperature", type=click.FloatRange(0, 2), default=LLMConfig().temperature, show_default=True,
                  help="The LLM's sampling temperature.")  # fmt: skip
    @click.option("--token-budget", type=click.IntRange(min=0), default=LLMConfig().token_budget, show_default=True,
                  help="Prompt + completion tokens of the run; LLM roles stop once spent (0: no limit).")  # fmt: skip
    @click.option("--usd-per-mtok", "prices", type=(float, float), default=(0.0, 0.0), show_default=True,
                  help="Prices per million prompt and completion tokens, for the cost estimate.")  # fmt: skip
    @functools.wraps(command)
    def wrapper(*args: Any, model: str, base_url: str | None, temperature: float, token_budget: int,
                prices: tuple[float, float], **kwargs: Any) -> Any:  # fmt: skip
        llm = LLMConfig(model=model, base_url=base_url, temperature=temperature, token_budget=token_budget,
                        usd_per_mtok_in=prices[0], usd_per_mtok_out=prices[1])  # fmt: skip
        return command(*args, llm=llm, **kwargs)

    return wrapper  # type: ignore[return-value]


def roles_for(store: GraphStore, target: Target, config: LLMConfig, architect: str, refiner: str) -> dict[str, Any]:
    """The architect and refiner policies the options ask for (LLM roles share one token budget)."""
    if "llm" not in (architect, refiner):
        return {}
    from agents.llm.policy import LLMPolicy, TokenBudget  # LangChain loads only when a role needs it

    budget = TokenBudget(config.token_budget)
    return {role: LLMPolicy(role, config, store, target, budget) for role, chosen in
            (("architect", architect), ("refiner", refiner)) if chosen == "llm"}  # fmt: skip


@main.command()
@store_options
@click.option("--toolchain", default=None, help="Toolchain version [default: the graph's active one].")
@click.option("--budget", "budget_s", type=click.FloatRange(min=0), default=DEFAULT_BUDGET_S, show_default=True,
              help="Device seconds the microbenchmarks may spend.")  # fmt: skip
@click.option("--policy", type=click.Choice(POLICIES), default="builtin", show_default=True,
              help="The librarian's policy: the builtin extractor, or an LLM that cites its paragraphs.")  # fmt: skip
@llm_options
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
def learn(app: App, toolchain: str | None, budget_s: float, policy: str, llm: LLMConfig, as_json: bool) -> None:
    """Learn the chip: docs into claims, compiler probes into rules, microbenchmarks into measurements."""
    target = open_target(app.settings)
    with app.open_store() as store:
        ensure_schema(store)
        register_target(store, target.name, target.toolchains(), target.default_toolchain())
        version = toolchain or active_toolchain(store, target.name) or target.default_toolchain()
        if version not in target.toolchains():
            raise ConfigError(f"unknown toolchain {version!r}; {target.name} has {', '.join(target.toolchains())}")
        probes = len(target.microbenchmarks())
        columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("{task.fields[spent]}"))  # fmt: skip
        with Progress(*columns, console=err_console, disable=as_json, transient=True) as progress:
            task = progress.add_task(f"learning {target.name} {version}", total=probes, spent="")
            spent = [0.0]

            def advance(probe: str, device_s: float) -> None:
                spent[0] += device_s
                progress.update(task, advance=1, spent=f"{probe}, {spent[0]:.0f} device-s of {budget_s:.0f}")

            librarian = None
            if policy == "llm":
                from agents.llm.librarian import LLMLibrarian  # LangChain loads only when a role needs it

                librarian = LLMLibrarian(llm, store)
            summary = learn_chip(store, target, version, budget_s=budget_s, librarian=librarian, on_probe=advance)
    if as_json:
        click.echo(to_json(summary.model_dump()))
        return
    docs, measured = summary.docs, summary.measurements
    console.print(
        f"[green]learnt[/green] {target.name} {version}: {docs.pages} page(s) read ({docs.unchanged} unchanged), "
        f"{summary.claims} claims ({summary.contradicted_claims} contradicted), {summary.rules_in_force} rules, "
        f"{summary.measured_params} parameters measured; {measured.probes_run} probe(s) run, "
        f"{len(measured.probes_skipped)} skipped, {len(measured.probes_failed)} failed; "
        f"{summary.device_s:.0f} device-s, {summary.wall_s:.1f} s"
    )
    if measured.probes_failed:
        console.print(f"[yellow]failed probes (recorded, skipped):[/yellow] {', '.join(measured.probes_failed)}")


@main.command()
@click.argument("kernels", nargs=-1)
@store_options
@click.option("--toolchain", default=None, help="Toolchain version [default: the graph's active one].")
@click.option("--budget", "budget_s", type=click.FloatRange(min=0), default=OPTIMIZE_BUDGET_S, show_default=True,
              help="Device seconds for all the kernels together.")  # fmt: skip
@click.option("--seed", type=int, default=None, help="Seed of the builtin policies [default: the settings' seed].")
@click.option("--patience", type=click.IntRange(min=1), default=PATIENCE, show_default=True,
              help="Stop a kernel after this many proposals without an accepted change.")  # fmt: skip
@click.option("--target", "target_ratio", type=click.FloatRange(min=1.0), default=TARGET_RATIO, show_default=True,
              help="Stop a kernel once BEST is within this factor of the measured weight-movement bound.")  # fmt: skip
@click.option("--resume", is_flag=True, help="Continue an interrupted run: finish its unfinished designs first.")
@click.option("--policy", type=click.Choice(POLICIES), default="builtin", show_default=True,
              help="The policy of both the architect and the refiner.")  # fmt: skip
@click.option(
    "--architect", type=click.Choice(POLICIES), default=None, help="The architect's policy [default: --policy]."
)
@click.option("--refiner", type=click.Choice(POLICIES), default=None, help="The refiner's policy [default: --policy].")
@llm_options
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
def optimize(app: App, kernels: tuple[str, ...], toolchain: str | None, budget_s: float, seed: int | None,
             patience: int, target_ratio: float, resume: bool, policy: str, architect: str | None,
             refiner: str | None, llm: LLMConfig, as_json: bool) -> None:  # fmt: skip
    """Optimize kernels (all by default): propose, screen, run and judge designs against BEST.

    The LLM policy reads its API key from the environment only ($OPENAI_API_KEY for openai:...)."""
    target = open_target(app.settings)
    with app.open_store() as store:
        ensure_schema(store)
        register_target(store, target.name, target.toolchains(), target.default_toolchain())
        active = active_toolchain(store, target.name)
        version = toolchain or active or target.default_toolchain()
        if active and version != active and store.read("MATCH (:Kernel)-[:BEST]->(d) RETURN d.id AS id LIMIT 1"):
            raise ConfigError(
                f"the graph's kernels are on toolchain {active}: run `chiplore toolchain upgrade {version}` first "
                "(it re-validates each BEST and re-checks the graph's facts)"
            )
        left = unfinished(store)
        if left and not resume:
            raise ConfigError(f"an earlier run left {left} design(s) unfinished: run `chiplore optimize --resume`")

        def say(kernel: str, message: str) -> None:
            if not as_json:
                err_console.print(f"[bold]{kernel}[/bold] {message}")

        roles = roles_for(store, target, llm, architect or policy, refiner or policy)
        summary = optimize_kernels(store, target, version, kernels=list(kernels) or None, budget_s=budget_s,
                                   seed=app.settings.seed if seed is None else seed, patience=patience,
                                   target_ratio=target_ratio, on_event=say, **roles)  # fmt: skip
        progress = [k for k in kernel_progress(store) if k.kernel in summary.kernels]
    if as_json:
        click.echo(to_json({**summary.model_dump(), "kernels": [k.model_dump() for k in progress]}))
        return
    console.print(progress_table(progress))
    console.print(f"{summary.proposals} proposals, {summary.accepted} accepted, {summary.device_s:.0f} device-s")


STATUS_STYLE = {"accepted": "green", "rejected": "red", "failed": "bold red", "screened_out": "dim",
                "measured": "yellow", "queued": "yellow", "proposed": "yellow"}  # fmt: skip


@main.command()
@click.argument("kernel")
@store_options
def tree(app: App, kernel: str) -> None:
    """A kernel's Design Tree: each design's status, cycles and change; BEST and its lineage in bold."""
    with app.open_store() as store:
        root, children, best = design_tree(store, kernel)
        lineage = {row["id"] for row in store.read(
            "MATCH (:Kernel {name: $k})-[:BEST]->(b:DesignNode) MATCH (b)-[:CHILD_OF*0..]->(d:DesignNode) "
            "RETURN d.id AS id", {"k": kernel})}  # fmt: skip
    if root is None:
        raise ConfigError(f"no design tree for {kernel!r}: run `chiplore optimize {kernel}` first")

    def label(node: DesignNode) -> str:
        style = STATUS_STYLE.get(node.status, "")
        cycles = f" {node.measured_cycles:,.0f} cycles" if node.measured_cycles else ""
        mark = " [bold]BEST[/bold]" if node.id == best else ""
        why = f" [dim]({escape(node.reason)})[/dim]" if node.reason and node.status != "accepted" else ""
        flag = f" [yellow]flagged {escape(node.flagged.split(':')[0])}[/yellow]" if node.flagged else ""
        text = (f"[{style}]{node.id[:10]} {node.role} {node.status}{cycles}[/{style}]{mark}{flag} "
                f"{escape(node.change)}{why}")  # fmt: skip
        return f"[bold]{text}[/bold]" if node.id in lineage else text

    view = Tree(label(root))

    def grow(branch: Tree, node: DesignNode) -> None:
        for child in children.get(node.id, []):
            grow(branch.add(label(child)), child)

    grow(view, root)
    console.print(view)


def progress_table(progress: list[KernelProgress]) -> Table:
    table = Table(title="kernels")
    for column in ("kernel", "baseline", "best [95% CI]", "x bound (true)", "x bound (measured)", "speedup",
                   "device-s", "designs"):  # fmt: skip
        table.add_column(column, justify="left" if column in ("kernel", "designs") else "right")
    for k in progress:
        best = f"{k.best_cycles:,.0f} [{k.best_ci_low:,.0f}, {k.best_ci_high:,.0f}]" if k.best_cycles else ""
        table.add_row(
            k.kernel, f"{k.baseline_cycles:,.0f}" if k.baseline_cycles else "", best,
            f"{k.ratio_to_bound:.3f}" if k.ratio_to_bound else "",
            f"{k.ratio_to_measured_bound:.3f}" if k.ratio_to_measured_bound else "",
            f"{k.speedup_vs_baseline:.2f}x" if k.speedup_vs_baseline else "", f"{k.device_seconds:.0f}",
            ", ".join(f"{n} {status}" for status, n in k.nodes_by_status.items()),
        )  # fmt: skip
    return table


@main.command()
@store_options
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=Path("report.html"), show_default=True,
              help="Where to write the report.")  # fmt: skip
def report(app: App, out: Path) -> None:
    """One self-contained HTML page: results, convergence, design trees, decisions, what was learnt, upgrades."""
    from chiplore.report import render_report  # matplotlib loads only for a report

    with app.open_store() as store:
        html = render_report(store)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html)
    console.print(f"[green]wrote[/green] {out} ({len(html) // 1024} KB)")


def demo_table(store: GraphStore) -> tuple[Table, list[dict[str, Any]], float | None]:
    """The demo's results: per kernel, what `status --json` says, and the accepted changes."""
    from chiplore.report import accepted_changes, geomean

    rows = [{**k.model_dump(), "accepted_changes": accepted_changes(store, k.kernel)} for k in kernel_progress(store)]
    speedups = [r["speedup_vs_baseline"] for r in rows if r["speedup_vs_baseline"]]
    mean = geomean(speedups) if rows and len(speedups) == len(rows) else None
    table = Table(title="chiplore demo: results")
    for column in ("kernel", "baseline", "best [95% CI]", "speedup", "x bound", "device-s", "accepted changes"):
        table.add_column(column, justify="left" if column == "kernel" else "right")
    for r in rows:
        best = (
            f"{r['best_cycles']:,.0f} [{r['best_ci_low']:,.0f}, {r['best_ci_high']:,.0f}]" if r["best_cycles"] else ""
        )
        table.add_row(r["kernel"], f"{r['baseline_cycles']:,.0f}" if r["baseline_cycles"] else "", best,
                      f"{r['speedup_vs_baseline']:.2f}x" if r["speedup_vs_baseline"] else "",
                      f"{r['ratio_to_bound']:.3f}" if r["ratio_to_bound"] else "", f"{r['device_seconds']:.0f}",
                      str(r["accepted_changes"]))  # fmt: skip
    if mean:
        table.caption = f"geomean speedup over the official baselines: {mean:.2f}x"
    return table, rows, mean


@main.command()
@store_options
@click.option("--budget", "budget_s", type=click.FloatRange(min=0), default=OPTIMIZE_BUDGET_S, show_default=True,
              help="Device seconds of each optimize round (before and after the upgrade).")  # fmt: skip
@click.option("--seed", type=int, default=None, help="Seed of the builtin policies [default: the settings' seed].")
@click.option("--patience", type=click.IntRange(min=1), default=PATIENCE, show_default=True,
              help="Stop a kernel after this many proposals without an accepted change.")  # fmt: skip
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("chiplore-report"),
              show_default=True, help="The folder the report is written to.")  # fmt: skip
@click.option("--resume", is_flag=True, help="Continue a demo that was interrupted.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
def demo(app: App, budget_s: float, seed: int | None, patience: int, out: Path, resume: bool, as_json: bool) -> None:
    """The main job: learn the chip, optimize every kernel, upgrade the toolchain, optimize again, report."""
    from chiplore.report import render_report

    target = open_target(app.settings)
    seed = app.settings.seed if seed is None else seed
    with app.open_store() as store:
        ensure_schema(store)
        register_target(store, target.name, target.toolchains(), target.default_toolchain())
        left = unfinished(store)
        active = active_toolchain(store, target.name) or target.default_toolchain()
        if left and not resume and not _demo_done(store, active):  # a finished round's leftovers wait for no one
            raise ConfigError(f"an earlier run left {left} design(s) unfinished: run `chiplore demo --resume`")
        newest = target.toolchains()[-1]
        columns = (SpinnerColumn(), TextColumn("[bold]{task.description}"), TextColumn("{task.fields[note]}"))
        with Progress(*columns, console=err_console, disable=as_json, transient=False) as progress:

            def step(description: str) -> Callable[[str], None]:
                task = progress.add_task(description, note="")
                return lambda note: progress.update(task, note=note[:90])

            version = active_toolchain(store, target.name) or target.default_toolchain()
            note = step(f"learn {target.name} {version}")
            learnt = learn_chip(store, target, version, on_probe=lambda probe, s: note(f"{probe} ({s:.0f} device-s)"))
            note(f"{learnt.claims} claims, {learnt.rules_in_force} rules, {learnt.measured_params} parameters")
            for round_version in dict.fromkeys([version, newest]):
                _demo_round(store, target, round_version, step, budget_s=budget_s, seed=seed, patience=patience)
        table, rows, mean = demo_table(store)
        html = render_report(store)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.html").write_text(html)
    if as_json:
        click.echo(to_json({"kernels": rows, "geomean_speedup": mean, "report": str(out / "report.html")}))
        return
    console.print(table)
    console.print(f"report: {out / 'report.html'}")


def _demo_round(store: GraphStore, target: Target, version: str, step: Callable[[str], Callable[[str], None]], *,
                budget_s: float, seed: int, patience: int) -> None:  # fmt: skip
    """Upgrade to `version` when it is not the active toolchain, then optimize under it (once)."""
    if version != active_toolchain(store, target.name):
        note = step(f"toolchain upgrade to {version}")
        done = upgrade_toolchain(store, target, version, on_event=note)
        repaired = sum(k.outcome == "repaired" for k in done.kernels)
        note(f"{done.rules.changed} rules and {len(done.measurements.changed)} measurements changed, "
             f"{repaired} programs repaired")  # fmt: skip
    note = step(f"optimize under {version}")
    if _demo_done(store, version):
        note("done in an earlier run")
        return
    summary = optimize_kernels(store, target, version, budget_s=budget_s, seed=seed, patience=patience,
                               on_event=lambda kernel, message: note(f"{kernel}: {message}"))  # fmt: skip
    _demo_mark(store, version)
    note(f"{summary.proposals} proposals, {summary.accepted} accepted, {summary.device_s:.0f} device-s")


def _demo_done(store: GraphStore, version: str) -> bool:
    rows = store.read("MATCH (a:Activity {id: $id}) RETURN a.ended_at AS e", {"id": f"demo-optimize-{version}"})
    return bool(rows and rows[0]["e"])


def _demo_mark(store: GraphStore, version: str) -> None:
    """A finished optimize round of the demo: a rerun or --resume does not repeat it."""
    record_activity(store, Activity(id=f"demo-optimize-{version}", role="demo", policy="builtin", ended_at=utc_now()))


@main.command()
@click.argument("name", required=False)
@click.option("-p", "--param", "params", multiple=True, metavar="NAME=VALUE", help="A query parameter.")
@store_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def query(app: App, name: str | None, params: tuple[str, ...], as_json: bool) -> None:
    """Run a named query read-only; without NAME, list the named queries."""
    if name is None:
        catalogue = [
            {
                "name": q.name,
                "params": ", ".join(f"{p.name}:{p.type}" + ("" if p.required else f"={p.default}") for p in q.params),
                "description": q.description,
            }
            for q in named_queries.load_all().values()
        ]
        print_records(console, catalogue, as_json=as_json, title="named queries")
        return
    named = named_queries.get(name)
    bound = named.bind(parse_params(params))  # before opening the store: a bad call costs nothing
    with app.open_store() as store:
        rows = store.read(named.text, bound)
    print_records(console, rows, as_json=as_json, title=name)


@main.command()
@click.argument("text")
@click.option("-p", "--param", "params", multiple=True, metavar="NAME=VALUE", help="A parameter (string).")
@store_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def cypher(app: App, text: str, params: tuple[str, ...], as_json: bool) -> None:
    """Run a Cypher query read-only (writes are refused)."""
    with app.open_store() as store:
        rows = store.read(text, parse_params(params))
    print_records(console, rows, as_json=as_json)


@main.group()
def toolchain() -> None:
    """The target's toolchain versions: list them, upgrade the graph to a newer one."""


@toolchain.command("list")
@store_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def toolchain_list(app: App, as_json: bool) -> None:
    """The toolchain versions the graph knows, oldest first, and which is active."""
    target = open_target(app.settings)
    with app.open_store() as store:
        rows = toolchains(store, target.name)
    print_records(console, rows, as_json=as_json)


@toolchain.command("upgrade")
@click.argument("version")
@store_options
@click.option("--budget", "budget_s", type=click.FloatRange(min=0), default=None,
              help="Device seconds for re-measuring and re-validating [default: 20 % of what learning the "
                   "current version took].")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
def toolchain_upgrade(app: App, version: str, budget_s: float | None, as_json: bool) -> None:
    """Move the graph to toolchain VERSION: stale facts re-checked, rules re-probed, kernels re-validated."""
    target = open_target(app.settings)
    with app.open_store() as store:
        ensure_schema(store)
        register_target(store, target.name, target.toolchains(), target.default_toolchain())

        def say(message: str) -> None:
            if not as_json:
                err_console.print(message)

        summary = upgrade_toolchain(store, target, version, budget_s=budget_s, on_event=say)
    if as_json:
        click.echo(to_json(summary.model_dump()))
        return
    print_upgrade(summary)


def print_upgrade(summary: UpgradeSummary) -> None:
    head = f"{summary.target} {summary.from_version} -> {summary.to_version}"
    if summary.already_done:
        console.print(f"[green]already upgraded[/green] {head}: nothing changed (the first run's summary follows)")
    else:
        console.print(f"[green]upgraded[/green] {head}")
    rules, measured = summary.rules, summary.measurements
    console.print(f"rules: {rules.confirmed} confirmed, {rules.changed} changed, {rules.retired} retired, "
                  f"{rules.new} new")  # fmt: skip
    console.print(f"measurements: {len(measured.confirmed)} confirmed, {len(measured.changed)} changed, "
                  f"{len(measured.stale)} still stale (the old value serves)")  # fmt: skip
    for r in measured.changed:
        console.print(f"  {r.param}: {r.before:,.4g} [{r.before_ci[0]:,.4g}, {r.before_ci[1]:,.4g}] -> "
                      f"{r.after:,.4g} [{r.after_ci[0]:,.4g}, {r.after_ci[1]:,.4g}]")  # fmt: skip
    table = Table("kernel", "design", "outcome", f"cycles {summary.from_version}", f"cycles {summary.to_version}",
                  title="re-validated kernels (before: every run so far; after: one graded job)")  # fmt: skip
    for k in summary.kernels:
        table.add_row(k.kernel, k.role, k.outcome, f"{k.cycles_before:,.0f}" if k.cycles_before else "-",
                      f"{k.cycles_after:,.0f}" if k.cycles_after else "-")  # fmt: skip
    if summary.kernels:
        console.print(table)
    console.print(f"{summary.flagged_designs} design(s) flagged; {summary.device_s:.0f} of {summary.budget_s:.0f} "
                  f"device-s")  # fmt: skip
    if summary.kernels_pending:
        console.print(f"[yellow]not finished:[/yellow] {', '.join(summary.kernels_pending)} not re-validated; "
                      "rerun `chiplore toolchain upgrade` with a larger --budget")  # fmt: skip


@main.group()
def db() -> None:
    """The graph database itself."""


@db.command("check")
@store_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def db_check(app: App, as_json: bool) -> None:
    """Connect, authenticate and report the server, the schema version and the constraints."""
    with app.open_store() as store:
        info = store.server_info()
        version = schema_version(store)
        objects = store.schema_objects()
    result = {
        **info.model_dump(),
        "schema_version": version,
        "schema_current": version == LATEST_VERSION,
        "unique_constraints": sum(o["kind"] == "unique" for o in objects),
        "indexes": sum(o["kind"] == "index" for o in objects),
        "settings": app.settings.public_view(),
    }
    if as_json:
        click.echo(to_json(result))
        return
    console.print(
        f"[green]ok[/green] {info.backend} at {info.address}: {info.server_version}, database {info.database}"
    )
    state = "current" if result["schema_current"] else f"needs `chiplore init` (latest is v{LATEST_VERSION})"
    console.print(
        f"schema v{version} ({state}); {result['unique_constraints']} unique constraints, {result['indexes']} indexes"
    )


def run() -> None:
    """The console script: a terminated command unwinds like Ctrl-C, so stores close cleanly."""

    def exit_on_sigterm(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, exit_on_sigterm)
    main()


if __name__ == "__main__":
    run()
