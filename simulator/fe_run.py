"""`fe-run`: submit a Ferrite program to the simulated device and print what the device reports.

The device lives on between calls: its clock, budget ledger, queue and random streams are kept in
`<data dir>/device/<device id>.json` (chiplore.simulator.device.state), so a sequence of fe-run calls is the
same as one session, and concurrent calls sharing a data dir queue behind one lock.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from chiplore.core.target import DeviceResult
from chiplore.simulator.cli_common import OneLineErrors, fail, package_version, read_source, settings
from chiplore.simulator.device import ALL_SETS, DeviceConfig, DeviceJob, InvalidJob, SimDevice
from chiplore.simulator.device.models import declared_kernels, unknown_kernel
from chiplore.simulator.device.state import DeviceStatus, DeviceStore, ResetReport
from chiplore.simulator.kernels.registry import KernelRegistry
from chiplore.simulator.target import KERNELS_DIR, kernel_paths
from chiplore.simulator.toolchain.rules import VERSIONS

CONFIG = DeviceConfig()

seed_option = click.option("--seed", type=int, default=None, help="Project seed (default: CHIPLORE_SEED).")
data_dir_option = click.option(
    "--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None, help="Default: CHIPLORE_DATA_DIR."
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")


@click.group(cls=OneLineErrors)
@click.version_option(
    package_version(),
    prog_name="fe-run",
    message=f"%(prog)s %(version)s (SimRNGD device {CONFIG.device_id}; toolchains {', '.join(VERSIONS)})",
)
def main() -> None:
    """The SimRNGD device (simulated, shared, noisy)."""


@main.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--kernel", required=True, help="Kernel of FILE the harness runs (e.g. sliding_attention_output).")
@click.option(
    "--fixtures",
    default="graded",
    show_default=True,
    help=f"smoke, graded, or a comma-separated list of sets among {','.join(ALL_SETS)} and the kernel pack's own "
    "(e.g. exact,cancel).",
)
@click.option("--repeats", type=click.IntRange(1, 50), default=1, show_default=True, help="Timed runs per set.")
@click.option("--toolchain", type=click.Choice(VERSIONS), default=None, help="Version (default: the file's header).")
@click.option("--profile", is_flag=True, help="Add a coarse timeline (doubles device time).")
@click.option("--agent", default="agent", show_default=True, help="Whose budget the job uses.")
@seed_option
@data_dir_option
@json_option
def submit(file: Path, kernel: str, fixtures: str, repeats: int, toolchain: str | None, profile: bool, agent: str,
           seed: int | None, data_dir: Path | None, as_json: bool) -> None:  # fmt: skip
    """Run FILE on the device; exit 1 unless it ran and (when graded) passed, 2 on bad input."""
    config = settings(data_dir=data_dir, seed=seed)
    program = read_source(file)
    declared = declared_kernels(program)  # None: it does not parse, and the compiler will say why (free)
    if declared is not None and kernel not in declared:
        fail(f"{file}: {unknown_kernel(kernel, declared)}")
    # the kernels SimRNGD offers: built in, on CHIPLORE_KERNELS, and installed in the data dir (graded alike)
    kernels = KernelRegistry(kernel_paths(config), config.data_dir / KERNELS_DIR)
    job = DeviceJob(kernel=kernel, program=program, toolchain=toolchain,
                    fixtures=_fixtures(fixtures, kernels.own_sets(kernel)), repeats=repeats, profile=profile,
                    agent=agent)  # fmt: skip
    device = SimDevice(config.seed, CONFIG, input_bytes=kernels.input_bytes, grader=kernels.grade_job,
                       own_sets=kernels.own_sets)  # fmt: skip
    try:
        with DeviceStore(config.data_dir, CONFIG.device_id).session(device):
            result = device.result(device.submit(job))
    except InvalidJob as error:
        fail(str(error))
    text = _summary(result)
    if result.status == "ok" and result.correctness is None and kernel not in kernels.packs:
        # a run with nothing to grade it against reads like a pass without this line
        text += (f"\n  correctness: not graded (no kernel pack named {kernel!r} is built in, on CHIPLORE_KERNELS or "
                 f"installed in {config.data_dir}: `chiplore kernel add` installs one)")  # fmt: skip
    click.echo(result.model_dump_json(indent=2) if as_json else text)
    sys.exit(0 if result.status == "ok" and (result.correctness is None or result.correctness.passed) else 1)


@main.command()
@click.option("--agent", default=None, help="Only this agent (default: every agent that used the device today).")
@seed_option
@data_dir_option
@json_option
def status(agent: str | None, seed: int | None, data_dir: Path | None, as_json: bool) -> None:
    """The device's clock, jobs and budget ledger (free: nothing is queued)."""
    config = settings(data_dir=data_dir, seed=seed)
    report = DeviceStore(config.data_dir, CONFIG.device_id).status(CONFIG, config.seed, agent)
    click.echo(report.model_dump_json(indent=2) if as_json else _status_text(report))


@main.command()
@seed_option
@data_dir_option
@json_option
def reset(seed: int | None, data_dir: Path | None, as_json: bool) -> None:
    """Start the device afresh: its saved state (clock, ledger, queue) moves to a .bak file."""
    config = settings(data_dir=data_dir, seed=seed)
    report = DeviceStore(config.data_dir, CONFIG.device_id).reset(CONFIG, config.seed)
    click.echo(report.model_dump_json(indent=2) if as_json else _reset_text(report))


def _fixtures(text: str, own: tuple[str, ...] = ()) -> str | tuple[str, ...]:
    """`--fixtures`: smoke, graded, or sets among the device's nine and `own` (the kernel pack's own)."""
    if text in ("smoke", "graded"):
        return text
    sets = tuple(part.strip() for part in text.split(","))
    known = (*ALL_SETS, *own)
    unknown = [name for name in sets if name not in known]
    if unknown or not sets:
        named = ", ".join(repr(name) for name in dict.fromkeys(unknown)) or repr(text)
        fail(f"--fixtures: {named} is no set of one list (smoke and graded stand alone, an empty name is none); "
             f"use smoke, graded or a list of {','.join(known)}")  # fmt: skip
    if len(set(sets)) < len(sets):
        fail(f"--fixtures: {text!r} names a set twice")
    return sets


def _summary(result: DeviceResult) -> str:
    lines = [f"{result.job_id}: {result.status} ({result.kernel}, toolchain {result.toolchain})"]
    lines += [f"  {d.severity}[{d.code}]: {d.message}" for d in result.diagnostics]
    if result.median_cycles is not None:
        lines.append(f"  median {result.median_cycles:,} cycles over {sum(not r.warmup for r in result.runs)} runs")
    if result.correctness is not None:
        lines.append(
            f"  correctness: {'passed' if result.correctness.passed else 'FAILED'} ({result.correctness.message})"
        )
    lines += [f"  fault {f.code} cluster={f.cluster} cycle={f.cycle} run={f.run}" for f in result.faults]
    if result.message:
        lines.append(f"  {result.message}")
    lines.append(
        f"  queue wait {result.queue_wait_s:.1f} s, device {result.device_s:.2f} s, wall {result.wall_s * 1000:.0f} ms"
    )
    return "\n".join(lines)


def _status_text(report: DeviceStatus) -> str:
    jobs = f"{report.jobs} job{'s' if report.jobs != 1 else ''}"
    project = f"{report.project_spent_s:.2f} device s charged"
    if report.project_budget_s is not None:
        project += f" of {report.project_budget_s:.0f}"
    lines = [f"{report.device_id} (seed {report.seed}): clock {report.clock_s:.1f} s (day {report.day}), {jobs}, "
             f"{project}"]  # fmt: skip
    lines.append(f"  state: {report.state_path}" if report.saved else f"  state: none yet ({report.state_path})")
    lines += [
        f"  {usage.agent}: {usage.spent_today_s:.2f} of {report.agent_budget_s_per_day:.0f} device s used today, "
        f"{usage.left_today_s:.2f} s left, {usage.pending} pending"
        for usage in report.agents
    ]
    return "\n".join(lines)


def _reset_text(report: ResetReport) -> str:
    if not report.removed:
        return f"{report.device_id}: nothing to reset (no state at {report.state_path})"
    text = f"reset {report.device_id}: moved {report.state_path} to {report.backup_path}"
    if report.previous is not None:
        old = report.previous
        return (
            text + f" (it held {old.jobs} jobs, clock {old.clock_s:.1f} s, {old.project_spent_s:.2f} device s charged)"
        )
    return text + f" (it was unreadable: {report.problem})"


if __name__ == "__main__":
    main()
