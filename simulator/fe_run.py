"""`fe-run`: submit a Ferrite program to the simulated device and print what the device reports.

The device lives on between calls: its clock, budget ledger, queue and random streams are kept in
`<data dir>/device/<device id>.json`, so a sequence of fe-run calls is the same as one session.
"""

from __future__ import annotations

import fcntl
import json
import sys
from pathlib import Path

import click

from chiplore.core.settings import Settings
from chiplore.core.target import DeviceJob, DeviceResult
from simulator.device import DeviceConfig, InvalidJob, SimDevice
from simulator.kernel_specs import input_bytes
from simulator.target import grade_job
from simulator.toolchain.rules import VERSIONS


@click.group()
def main() -> None:
    """The SimRNGD device (simulated, shared, noisy)."""


@main.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--kernel", required=True, help="Kernel the harness runs (e.g. sliding_attention_output).")
@click.option("--fixtures", type=click.Choice(["smoke", "graded"]), default="graded", show_default=True)
@click.option("--repeats", type=click.IntRange(1, 50), default=1, show_default=True, help="Timed runs per set.")
@click.option("--toolchain", type=click.Choice(VERSIONS), default=None, help="Version (default: the file's header).")
@click.option("--profile", is_flag=True, help="Add a coarse timeline (doubles device time).")
@click.option("--agent", default="agent", show_default=True, help="Whose budget the job uses.")
@click.option("--seed", type=int, default=None, help="Project seed (default: CHIPLORE_SEED).")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def submit(file: Path, kernel: str, fixtures: str, repeats: int, toolchain: str | None, profile: bool, agent: str,
           seed: int | None, data_dir: Path | None, as_json: bool) -> None:  # fmt: skip
    """Run FILE on the device; exit 1 unless it ran and (when graded) passed."""
    settings = Settings() if data_dir is None else Settings(data_dir=data_dir)
    try:
        program = file.read_text(errors="replace")
    except OSError as error:
        click.secho(f"error: cannot read {file}: {error.strerror}", fg="red", err=True)
        sys.exit(2)
    config = DeviceConfig()
    device = SimDevice(settings.seed if seed is None else seed, config, input_bytes=input_bytes, grader=grade_job)
    state_file = settings.data_dir / "device" / f"{config.device_id}.json"
    state_file.parent.mkdir(parents=True, exist_ok=True)
    # One fe-run at a time per device: the state is read, advanced and written under the lock.
    with (state_file.parent / f"{config.device_id}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if state_file.exists():
                device.restore(json.loads(state_file.read_text()))
            job = DeviceJob(kernel=kernel, program=program, toolchain=toolchain, fixtures=fixtures,  # type: ignore[arg-type]
                            repeats=repeats, profile=profile, agent=agent)  # fmt: skip
            result = device.result(device.submit(job))
        except (InvalidJob, ValueError) as error:
            click.secho(f"error: {error}", fg="red", err=True)
            sys.exit(2)
        state_file.write_text(json.dumps(device.snapshot()))
    click.echo(result.model_dump_json(indent=2) if as_json else _summary(result))
    sys.exit(0 if result.status == "ok" and (result.correctness is None or result.correctness.passed) else 1)


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
