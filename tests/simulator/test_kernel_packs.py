"""Kernel packs (docs/kernels.md): the shipped packs load and validate; a malformed pack is one clear
error that installs nothing; a pack added to a target is offered, host-tested, graded by the device
and held to its signature by the compiler, and stays installed for the next target on that data dir;
a pack without reference.py is graded by its op graph, and changes only the fixture sets it uses."""

from __future__ import annotations

import hashlib
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from chiplore.core.errors import TargetError, Terminated
from chiplore.core.settings import Settings
from chiplore.core.target import DeviceJob
from chiplore.simulator.cost.bound import weight_bound_cycles
from chiplore.simulator.cost.estimate import estimate
from chiplore.simulator.execute import recipe as recipe_module
from chiplore.simulator.execute.fixtures import SETS
from chiplore.simulator.execute.grading import case_inputs, grade_case
from chiplore.simulator.execute.recipe import draw_inputs
from chiplore.simulator.execute.values import InputError, Periodic, RopeTable
from chiplore.simulator.kernels import limits
from chiplore.simulator.kernels.builtin import builtin_packs, shipped_folders
from chiplore.simulator.kernels.manifest import PackProblem
from chiplore.simulator.kernels.pack import param_bytes, read_pack
from chiplore.simulator.kernels.registry import STAMP
from chiplore.simulator.kernels.validate import validate_pack
from chiplore.simulator.pack import SimRNGDPack
from chiplore.simulator.target import SimRNGD, from_settings
from chiplore.simulator.toolchain.harness import BUILTIN_PACKS

GEMMA = ("sliding_project_qkv", "sliding_attention_output", "decoder_feedforward")
NEW = ("gqa_project_qkv", "swiglu_feedforward", "vocab_projection")
GQA = "gqa_project_qkv"  # the quickest new pack to validate: the malformed cases start from it


def copy_pack(tmp_path: Path, name: str = GQA, folder: str = "pack") -> Path:
    destination = tmp_path / folder
    shutil.copytree(BUILTIN_PACKS / name, destination)
    return destination


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))


def one_line(error: BaseException, *needles: str) -> str:
    message = str(error)
    assert "\n" not in message, message
    for needle in needles:
        assert needle in message, message
    return message


# ---- the shipped packs ---------------------------------------------------------------------------


def test_the_built_in_kernels_are_the_gemma_layer_in_order_and_the_new_packs_ship_beside_them() -> None:
    assert tuple(builtin_packs()) == GEMMA
    assert tuple(k.name for k in SimRNGD().kernels()) == GEMMA
    assert {folder.name for folder in shipped_folders()} == {*GEMMA, *NEW}


@pytest.mark.parametrize("name", [*GEMMA, *NEW])
def test_every_shipped_pack_reads_into_a_kernel_spec(name: str) -> None:
    pack = read_pack(BUILTIN_PACKS / name, "built-in")
    spec = pack.spec
    assert spec.name == name and spec.label and spec.description and spec.ops is not None
    assert spec.baseline_source == (BUILTIN_PACKS / name / "baseline.fe").read_text()
    assert spec.weight_bytes == sum(param_bytes(p) for p in spec.params if p.name in pack.weight_names) > 0
    assert spec.bound_cycles == weight_bound_cycles(spec.weight_bytes)
    if name in GEMMA:  # the matvecs' weights and scales are what the harness always counted
        assert set(pack.weight_names) == {p.name for p in spec.params if p.name.endswith(
            ("_weight", "_weight_packed", "_weight_scale", "_global_scale")) and "rms" not in p.name}  # fmt: skip


def test_the_new_packs_differ_in_shape_and_each_baseline_is_several_times_its_bound() -> None:
    packs = {name: read_pack(BUILTIN_PACKS / name, "built-in") for name in (*GEMMA, *NEW)}
    specs = {name: pack.spec for name, pack in packs.items()}
    rows = [p.shape[0][1] for n in GEMMA for p in specs[n].params if p.name in packs[n].weight_names]
    widest_gemma = max(rows)  # the widest projection output (rows of a matvec weight)
    assert specs["vocab_projection"].axes["V"] >= 8 * widest_gemma  # far wider output than any Gemma kernel
    assert specs["gqa_project_qkv"].axes["Nq"] == 32 and specs["gqa_project_qkv"].axes["Nk"] == 8
    swiglu = {p.name: p for p in specs["swiglu_feedforward"].params}
    assert {swiglu[w].dtype for w in ("gate_weight", "up_weight", "down_weight")} == {"f8e4m3"}
    assert swiglu["gate_scale"].shape == swiglu["gate_weight"].shape[:1]  # one scale per output row
    for name in NEW:
        cycles = estimate(specs[name].baseline_source, "0.6.0").cycles
        assert 3 <= cycles / specs[name].bound_cycles <= 8, (name, cycles, specs[name].bound_cycles)


@pytest.mark.slow
@pytest.mark.parametrize("name", [*GEMMA, *NEW])
def test_every_shipped_pack_validates_with_the_design_space_it_has(name: str) -> None:
    """Compile, the reference's shapes, the baseline on the smoke set, and the first program the
    generator writes from the pack's op graph (the hook every pack with a space goes through)."""
    pack = read_pack(BUILTIN_PACKS / name, "CHIPLORE_KERNELS")
    assert SimRNGDPack().design_space(pack.spec) is not None  # every shipped pack is designed by the generator
    validate_pack(pack, SimRNGDPack().design_space)


@pytest.mark.slow
@pytest.mark.parametrize("name", NEW)
def test_each_new_baseline_passes_every_fixture_set(name: str) -> None:
    pack = read_pack(BUILTIN_PACKS / name, "built-in")
    result = grade_case(pack.baseline, pack.case, "0.6.0", SETS)
    assert result.passed, result.message


# ---- malformed packs ----------------------------------------------------------------------------

Break = Callable[[Path], None]
MALFORMED: dict[str, tuple[Break, tuple[str, ...]]] = {
    "bad TOML": (lambda p: edit(p / "kernel.toml", 'label = "GQA"', 'label = "GQA'), ("not valid TOML",)),
    "unknown field": (lambda p: edit(p / "kernel.toml", "atol = 0.04", "atol = 0.04\nbudget = 3"),
                      ("budget: unknown field",)),
    "unknown op": (lambda p: edit(p / "kernel.toml", 'op = "head_norm"\ninput = "q"', 'op = "layer_norm"\ninput = "q"'),
                   ("ops[5]: unknown op 'layer_norm'",)),
    # TOML has types: a string or a number where a flag or a count goes is refused, not read as one
    "a flag as text": (lambda p: edit(p / "kernel.toml", 'out = "qn"\nround_bf16 = true',
                                      'out = "qn"\nround_bf16 = "yes"'),
                       ("ops[5].round_bf16: Input should be a valid boolean",)),
    "a count as text": (lambda p: edit(p / "kernel.toml", "head_dim = 128\nweight = \"q_norm_weight\"",
                                       "head_dim = \"128\"\nweight = \"q_norm_weight\""),
                        ("ops[5].head_dim: Input should be a valid integer",)),
    "op graph against the signature": (lambda p: edit(p / "kernel.toml", 'input = "qn"', 'input = "qnn"'),
                                       ("reads 'qnn'",)),
    # each store writes its whole output: a second one hid the first, and validation blamed the baseline
    "an output written twice": (lambda p: edit(p / "kernel.toml", 'to = "q_out"\n',
                                               'to = "q_out"\n\n[[ops]]\nop = "store"\ninput = "qn"\nto = "q_out"\n'),
                                ("op 8 (store) writes 'q_out' again (op 7 wrote it)",)),
    # every problem one check finds is in the line, up to three (a second was "(and 1 more)")
    "two problems in the op graph": (lambda p: (edit(p / "kernel.toml", 'input = "qn"', 'input = "qnn"'),
                                                edit(p / "kernel.toml", 'to = "q_out"\n', 'to = "q_out"\n\n[[ops]]\n'
                                                     'op = "store"\ninput = "x"\nto = "q_out"\n')),
                                     ("reads 'qnn', which is neither an input nor defined above; op 8 (store) writes "
                                      "'q_out' again (op 7 wrote it)",)),
    "missing recipe": (lambda p: edit(p / "kernel.toml", "[fixtures.inputs.q_scale]\n", "[fixtures.inputs.q_scalar]\n"),
                       ("has no parameter q_scalar",)),
    "name differs from the baseline's": (lambda p: edit(p / "kernel.toml", 'name = "gqa_project_qkv"',
                                                        'name = "gqa_attention"'),
                                         ("defines kernel gqa_project_qkv", "names gqa_attention")),
    "baseline does not compile": (lambda p: edit(p / "baseline.fe", "fold = [R % f]", "fold = [R % 16]"),
                                  ("does not compile under 0.6.0", "error[E0")),
    # an unknown name is E0102 as a harness mismatch is: it was let through, and the executor's KeyError
    # was a traceback out of `kernel add` and of every command while the pack was on CHIPLORE_KERNELS
    "an unknown dtype in the signature": (lambda p: edit(p / "baseline.fe", "    input_norm_weight: &hbm<bf16>[H],",
                                                         "    input_norm_weight: &hbm<f16>[H],"),
                                          ("does not compile under 0.6.0", "error[E0102]", "unknown dtype 'f16'")),
    "an unknown dtype in a local": (lambda p: edit(p / "baseline.fe", "let w_d: dm<bf16>{..Red8",
                                                   "let w_d: dm<f16>{..Red8"),
                                    ("error[E0102]", "unknown dtype 'f16'; did you mean 'bf16'?")),
    "baseline fails its reference": (lambda p: edit(p / "baseline.fe", "mul(0.0078125)", "mul(0.015625)"),
                                     ("baseline.fe fails its reference on the smoke fixtures",)),
    "reference shape mismatch": (lambda p: edit(p / "reference.py", 'q.reshape(np.shape(inputs["q_out"]))', "q"),
                                 ("output q_out has shape (4096,)", "(32, 128)")),
    "reference dtype mismatch": (lambda p: edit(p / "reference.py", 'q.reshape(np.shape(inputs["q_out"]))',
                                                'q.reshape(np.shape(inputs["q_out"])).astype(np.int32)'),
                                 ("output q_out is int32",)),
    "reference raises": (lambda p: edit(p / "reference.py", 'inputs["kv_pos"]', 'inputs["kv_position"]'),
                         ("reference.py raises KeyError",)),
    "no reference function": (lambda p: edit(p / "reference.py", "def reference(", "def expected("),
                              ("defines no function `reference(inputs)`",)),
    "missing file": (lambda p: (p / "baseline.fe").unlink(), ("lacks baseline.fe",)),
    "a set the device never asks for": (lambda p: edit(p / "kernel.toml", "sets.cancel = { block_offsets",
                                                       "sets.g7 = { block_offsets"),
                                        ("fixtures: input x changes sets g7 that the recipe does not list",)),
    # a recipe numpy cannot draw from, or that does not fit its parameter, is refused when read or validated:
    # it was a traceback out of `kernel add` and of every later command
    "uniform low above high": (lambda p: edit(p / "kernel.toml", "low = 0.75, high = 1.25", "low = 1.25, high = 0.75"),
                               ("input_norm_weight", "low <= high")),
    "normal of negative spread": (lambda p: edit(p / "kernel.toml", 'kind = "uniform", low = 0.75, high = 1.25',
                                                 'kind = "normal", std = -1.0'),
                                  ("input_norm_weight", "std", "greater than or equal to 0")),
    "an empty range of integers": (lambda p: edit(p / "kernel.toml", 'dist = { kind = "position", axis = "T" }',
                                                  'dist = { kind = "integers", low = 5, high = 5 }'),
                                   ("kv_pos", "low 5 must be below high 5")),
    "infinity": (lambda p: edit(p / "kernel.toml", "low = 0.75, high = 1.25", "low = 0.75, high = inf"),
                 ("input_norm_weight", "finite number")),
    "a bound as text": (lambda p: edit(p / "kernel.toml", "low = 0.75, high = 1.25", 'low = "0.75", high = 1.25'),
                        ("input_norm_weight", "valid number")),
    "a tolerance as a flag": (lambda p: edit(p / "kernel.toml", "atol = 0.04", "atol = true"),
                              ("atol", "valid number")),
    "a tolerance as text": (lambda p: edit(p / "kernel.toml", "rtol = 0.01", 'rtol = "0.01"'),
                            ("rtol", "valid number")),
    "an input divided by itself": (lambda p: edit(p / "kernel.toml", 'divide_by = "input_norm_weight"',
                                                  'divide_by = "x"'),
                                   ("input x divides by itself",)),
    "f8 codes for a bf16 input": (lambda p: edit(p / "kernel.toml", "low = 0.75, high = 1.25 }", "low = 0.75, "
                                                 'high = 1.25 }\nsets.exact = { dist = { kind = "f8_codes" } }'),
                                  ("fixtures: set exact", "f8_codes", "input_norm_weight")),
    "a reference that exits": (lambda p: edit(p / "reference.py", "def reference(inputs", "def reference(inputs"
                                              ") -> None:\n    raise SystemExit(3)\n\n\ndef unused(inputs"),
                               ("reference.py raises SystemExit",)),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_pack_is_one_clear_error_and_installs_nothing(case: str, tmp_path: Path) -> None:
    folder = copy_pack(tmp_path)
    breaks, needles = MALFORMED[case]
    breaks(folder)
    installed = tmp_path / "data" / "kernels"
    target = SimRNGD(kernels_dir=installed)
    with pytest.raises(TargetError) as error:
        target.add_kernel(folder)
    one_line(error.value, *needles)
    assert not installed.exists() or not any(installed.iterdir())
    assert [k.name for k in target.kernels()] == list(GEMMA)


@pytest.mark.parametrize("where", ["reference", "import"])
def test_a_reference_that_never_returns_is_one_line_after_the_time_limit(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # it hung `kernel add` (and every later command: an installed pack is validated when read) until
    # killed, then blamed the reference for the kill: "raises SystemExit ... 143"
    monkeypatch.setattr(limits, "REFERENCE_LIMIT_S", 1.0)
    folder = copy_pack(tmp_path)
    if where == "reference":
        edit(folder / "reference.py", "def reference(inputs", "def reference(inputs) -> None:\n    while True:\n"
             "        pass\n\n\ndef unused(inputs")  # fmt: skip
    else:
        with (folder / "reference.py").open("a") as module:
            module.write("\nwhile True:\n    pass\n")
    installed = tmp_path / "data" / "kernels"
    with pytest.raises(TargetError) as error:
        SimRNGD(kernels_dir=installed).add_kernel(folder)
    one_line(error.value, "reference.py does not", "within 1 s")
    assert not installed.exists() or not any(installed.iterdir())


def test_the_references_time_limit_keeps_an_alarm_set_before_it() -> None:
    """A test runner's own timeout (pytest-timeout's alarm) outlives a validation inside the test."""
    fired: list[float] = []
    previous = signal.signal(signal.SIGALRM, lambda *_: fired.append(time.monotonic()))
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        with pytest.raises(limits.OutOfTime), limits.time_limit(0.2):
            while True:
                pass
        assert 0.5 < signal.getitimer(signal.ITIMER_REAL)[0] <= 0.8  # set again, less the 0.2 s
        time.sleep(1.0)
        assert len(fired) == 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_a_terminated_command_is_not_the_references_fault(tmp_path: Path) -> None:
    folder = copy_pack(tmp_path)
    edit(folder / "reference.py", "def reference(inputs", "def reference(inputs) -> None:\n"
         "    raise Terminated(143)  # what the CLI's SIGTERM handler raises\n\n\ndef unused(inputs")  # fmt: skip
    with (folder / "reference.py").open("a") as module:
        module.write("\nfrom chiplore.core.errors import Terminated  # noqa: E402\n")
    with pytest.raises(Terminated):
        SimRNGD(kernels_dir=tmp_path / "data" / "kernels").add_kernel(folder)


def test_a_pack_saved_with_a_byte_order_mark_loads(tmp_path: Path) -> None:
    # an editor's BOM made kernel.toml "Invalid statement (at line 1, column 1)"
    folder = copy_pack(tmp_path)
    for name in ("kernel.toml", "baseline.fe"):
        (folder / name).write_bytes(b"\xef\xbb\xbf" + (folder / name).read_bytes())
    spec = SimRNGD(kernels_dir=tmp_path / "data" / "kernels").add_kernel(folder)
    assert spec.name == GQA and not spec.baseline_source.startswith("\ufeff")


def test_a_pack_named_like_a_built_in_kernel_is_refused(tmp_path: Path) -> None:
    folder = copy_pack(tmp_path, "sliding_attention_output")
    with pytest.raises(TargetError) as error:
        SimRNGD(kernels_dir=tmp_path / "kernels").add_kernel(folder)
    one_line(error.value, "kernel sliding_attention_output is built in")
    with pytest.raises(TargetError) as error:
        SimRNGD(kernel_paths=(folder,))
    one_line(error.value, "is built in")


def test_reading_names_the_field_of_a_bad_value(tmp_path: Path) -> None:
    folder = copy_pack(tmp_path)
    edit(folder / "kernel.toml", "rtol = 0.01", "rtol = -1")
    with pytest.raises(PackProblem) as error:
        read_pack(folder, "installed")
    one_line(error.value, "rtol: Input should be greater than or equal to 0")


# ---- adding a pack -------------------------------------------------------------------------------


def test_an_added_pack_is_offered_tested_graded_and_checked_and_stays_installed(tmp_path: Path) -> None:
    installed = tmp_path / "data" / "kernels"
    target = SimRNGD(kernels_dir=installed)
    spec = target.add_kernel(copy_pack(tmp_path))
    assert spec.name == GQA and (installed / GQA / STAMP).read_text().strip()
    assert target.kernel_origins()[GQA] == "installed" and [k.name for k in target.kernels()][-1] == GQA

    tested = target.host_test(spec.baseline_source, GQA, "0.6.0")
    assert tested.correctness is not None and tested.correctness.passed, tested.message
    handle = target.submit(DeviceJob(kernel=GQA, program=spec.baseline_source, toolchain="0.6.0", fixtures="smoke"))
    result = target.result(handle)
    assert result.status == "ok" and result.correctness is not None and result.correctness.passed
    wrong = spec.baseline_source.replace("mul(0.0078125)", "mul(0.015625)")
    graded = target.result(target.submit(DeviceJob(kernel=GQA, program=wrong, toolchain="0.6.0", fixtures="smoke")))
    assert graded.correctness is not None and not graded.correctness.passed

    renamed = spec.baseline_source.replace("q_scale: &hbm<f32>[1]", "q_scales: &hbm<f32>[1]")
    assert any(d.code == "E0102" for d in target.check(renamed, "0.6.0").diagnostics)

    again = SimRNGD(kernels_dir=installed)  # a later process on the same data dir
    assert again.kernel_origins()[GQA] == "installed"
    with pytest.raises(TargetError) as error:
        again.add_kernel(copy_pack(tmp_path, folder="second"))
    one_line(error.value, f"kernel {GQA} is already installed", "delete that folder, then add the pack again")
    with pytest.raises(TargetError) as error:  # the variable names a pack the data dir holds too
        SimRNGD(kernel_paths=(copy_pack(tmp_path, folder="third"),), kernels_dir=installed)
    one_line(error.value, f"kernel {GQA} is defined twice", f"delete the installed copy {(installed / GQA).resolve()}")


def test_adding_a_pack_the_kernels_variable_already_offers_says_it_runs_as_it_is(tmp_path: Path) -> None:
    folder = copy_pack(tmp_path)
    target = SimRNGD(kernel_paths=(folder,), kernels_dir=tmp_path / "kernels")
    with pytest.raises(TargetError) as error:
        target.add_kernel(folder)
    one_line(error.value, f"kernel {GQA} is already offered by CHIPLORE_KERNELS ({folder.resolve()}): it runs as it is")
    with pytest.raises(TargetError) as error:  # another folder of the same name is a clash
        target.add_kernel(copy_pack(tmp_path, folder="second"))
    one_line(error.value, f"kernel {GQA} is defined twice", "keep one: name one of them in CHIPLORE_KERNELS")


def test_an_installed_pack_edited_afterwards_is_validated_again(tmp_path: Path) -> None:
    installed = tmp_path / "kernels"
    SimRNGD(kernels_dir=installed).add_kernel(copy_pack(tmp_path))
    edit(installed / GQA / "kernel.toml", 'op = "store"', 'op = "stash"')
    with pytest.raises(TargetError) as error:
        SimRNGD(kernels_dir=installed)
    one_line(error.value, str(installed / GQA), "unknown op 'stash'")


def test_chiplore_kernels_offers_a_pack_or_a_folder_of_packs(tmp_path: Path) -> None:
    folder = copy_pack(tmp_path, folder="packs/gqa")
    target = from_settings(Settings(data_dir=tmp_path / "data", kernels=str(folder)))
    assert target.kernel_origins()[GQA] == "CHIPLORE_KERNELS"
    assert GQA in {k.name for k in from_settings(Settings(data_dir=tmp_path / "data",
                                                          kernels=str(tmp_path / "packs"))).kernels()}  # fmt: skip
    shipped = from_settings(Settings(data_dir=tmp_path / "data", kernels=str(BUILTIN_PACKS)))
    assert [k.name for k in shipped.kernels()] == [*GEMMA, *NEW]  # the built-in ones are no clash
    with pytest.raises(TargetError) as error:
        from_settings(Settings(data_dir=tmp_path / "data", kernels=f"{folder}:{tmp_path / 'nowhere'}"))
    one_line(error.value, "CHIPLORE_KERNELS names", "nowhere", "not a folder")
    edit(folder / "reference.py", "def reference(", "def expected(")
    with pytest.raises(TargetError) as error:
        from_settings(Settings(data_dir=tmp_path / "data", kernels=str(folder)))
    one_line(error.value, "defines no function")


def test_a_generated_program_that_fails_the_reference_fails_validation(tmp_path: Path) -> None:
    """The design-space hook: a space whose first program is not this kernel's is one error."""
    pack = read_pack(copy_pack(tmp_path, "sliding_attention_output"), "installed")
    with pytest.raises(PackProblem) as error:
        qkv = read_pack(BUILTIN_PACKS / "sliding_project_qkv", "built-in").spec
        validate_pack(pack, lambda spec, facts: SimRNGDPack().design_space(qkv, facts))
    one_line(error.value, "the program generated from its op graph")


def test_the_toy_chip_takes_no_packs(tmp_path: Path) -> None:
    from tests.toy.target import ToyChip

    with pytest.raises(TargetError) as error:
        ToyChip().add_kernel(copy_pack(tmp_path))
    one_line(error.value, "takes no kernel packs")


def test_a_reference_that_fails_on_a_graded_set_is_one_line_from_the_device(tmp_path: Path) -> None:
    """Validation runs the reference on the smoke set only; on another set its failure names the pack."""
    folder = copy_pack(tmp_path)
    smoke_scale = float(case_inputs(read_pack(folder, "installed").case, "g0")["q_scale"][0])  # type: ignore[index]
    guard = (
        f"    if float(np.asarray(inputs['q_scale'])[0]) != {smoke_scale!r}:\n"
        "        raise ValueError('only the smoke set')\n"
    )
    edit(folder / "reference.py", "    h = rmsnorm(", guard + "    h = rmsnorm(")
    target = SimRNGD(kernels_dir=tmp_path / "kernels")
    spec = target.add_kernel(folder)
    job = DeviceJob(kernel=GQA, program=spec.baseline_source, toolchain="0.6.0", fixtures=("g1",))
    with pytest.raises(TargetError) as error:
        target.result(target.submit(job))
    one_line(error.value, f"kernel pack {GQA}", "reference.py raises ValueError: only the smoke set")


# ---- a pack without reference.py, and fixture sets a pack need not change -------------------------


def test_a_pack_without_reference_py_is_graded_by_its_op_graph(tmp_path: Path) -> None:
    folder = copy_pack(tmp_path)
    (folder / "reference.py").unlink()
    target = SimRNGD(kernels_dir=tmp_path / "kernels")
    spec = target.add_kernel(folder)
    assert not (tmp_path / "kernels" / GQA / "reference.py").exists()
    tested = target.host_test(spec.baseline_source, GQA, "0.6.0")
    assert tested.correctness is not None and tested.correctness.passed, tested.message
    wrong = spec.baseline_source.replace("mul(0.0078125)", "mul(0.015625)")
    tested = target.host_test(wrong, GQA, "0.6.0")
    assert tested.correctness is not None and not tested.correctness.passed


def test_a_derived_reference_the_inputs_do_not_fit_is_one_line_naming_the_op(tmp_path: Path) -> None:
    folder = copy_pack(tmp_path, "sliding_project_qkv")
    (folder / "reference.py").unlink()
    text = (folder / "kernel.toml").read_text()
    rope = 'op = "rope"\ninput = "qn"\ncos = "cos"\nsin = "sin"\nposition = "rope_pos"\nhead_dim = 256'
    edit(folder / "kernel.toml", rope, rope.replace("256", "128"))
    assert text != (folder / "kernel.toml").read_text()
    with pytest.raises(PackProblem) as error:
        validate_pack(read_pack(folder, "installed"))
    one_line(error.value, "the op graph's reference raises GraphReferenceError on the smoke fixtures: "
                          "op 8 (rope qr): cos has rows of 256, the heads are 128 wide")  # fmt: skip
    # a matvec whose input is not as long as its weight's rows: the weight was read as rows of the input's
    # length (its size divides), and the pack failed at its store, or passed with a graph that was wrong
    edit(folder / "kernel.toml", rope.replace("256", "128"), rope)
    matvec = 'op = "matvec"\ninput = "h"\nweight = "k_weight"'
    edit(folder / "kernel.toml", matvec, matvec.replace('"h"', '"k_rms_weight"'))
    with pytest.raises(PackProblem) as error:
        validate_pack(read_pack(folder, "installed"))
    one_line(error.value, "op 3 (matvec k): weight k_weight is declared [2,048, 3,840]: its rows (its last dimensions) "
                          "do not hold the 256 values of its input k_rms_weight")  # fmt: skip


def test_a_pack_changes_only_the_fixture_sets_it_has_a_use_for(tmp_path: Path) -> None:
    """Without `sets.exact` and `sets.cancel`, and listing no set, a pack still draws every set the
    device asks for: the plain recipe under each set's own seed."""
    folder = copy_pack(tmp_path)
    text = (folder / "kernel.toml").read_text()
    plain = "\n".join(line for line in text.splitlines() if not line.startswith(("sets.exact", "sets.cancel")))
    (folder / "kernel.toml").write_text(plain.replace("rtol = 0.01\n", "rtol = 0.01\n\n[fixtures]\nsets = []\n", 1))
    pack, shipped = read_pack(folder, "installed"), read_pack(BUILTIN_PACKS / GQA, "installed")
    for fixture_set in ("g0", "cancel"):
        drawn, before = case_inputs(pack.case, fixture_set), case_inputs(shipped.case, fixture_set)
        assert np.array_equal(np.asarray(drawn["input_norm_weight"]), np.asarray(before["input_norm_weight"]))
    drawn, before = case_inputs(pack.case, "cancel"), case_inputs(shipped.case, "cancel")
    assert not np.array_equal(np.asarray(drawn["x"]), np.asarray(before["x"]))  # the shipped pack changes it
    assert np.abs(np.asarray(drawn["x"])).max() <= 1.0  # the plain recipe: uniform in [-1, 1]


def test_round_bf16_belongs_to_ops_that_define_a_value(tmp_path: Path) -> None:
    folder = copy_pack(tmp_path)
    edit(folder / "kernel.toml", 'op = "store"\ninput = "qn"', 'op = "store"\nround_bf16 = true\ninput = "qn"')
    with pytest.raises(PackProblem) as error:
        read_pack(folder, "installed")
    one_line(error.value, "ops[7].round_bf16: unknown field")


def fixture_digest(values: dict[str, object]) -> str:
    sha = hashlib.sha256()
    for name in sorted(values):
        value = values[name]
        sha.update(name.encode())
        if isinstance(value, RopeTable):
            sha.update(repr((value.positions, value.width, value.kind, value.theta, value.negate_low_half)).encode())
        elif isinstance(value, Periodic):
            sha.update(f"{value.rows}{value.distinct.dtype}".encode() + np.ascontiguousarray(value.distinct).tobytes())
        else:
            array = np.asarray(value)
            sha.update(f"{array.dtype}{array.shape}".encode() + np.ascontiguousarray(array).tobytes())
    return sha.hexdigest()[:16]


# sha256 over each set's digest (g0..g6, exact, cancel), drawn before fixture sets became optional
DRAWN_BEFORE = {
    "decoder_feedforward": "4fa567622f3a237e", "gqa_project_qkv": "1547cd7dbf58fc0f",
    "sliding_attention_output": "ecf45f346d1ab063", "sliding_project_qkv": "c5829277ab41c467",
    "swiglu_feedforward": "1d07bfa800161c87", "vocab_projection": "113b80a858b2af01",
}  # fmt: skip


@pytest.mark.parametrize(
    ("rows", "fix"),
    [
        (None, "give it distinct_rows (at most 2)"),
        (509, "its distinct_rows = 509 draws 509 of its 4,096 rows: at most 2 fit"),
    ],
)
def test_an_input_past_the_draw_cap_says_how_many_distinct_rows_fit(
    rows: int | None, fix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "give it distinct_rows" was the advice for an input that had them, too many
    monkeypatch.setattr(recipe_module, "MAX_DRAWN", 10_000)  # q_weight's rows are 4,096 values: 2 fit
    pack = read_pack(BUILTIN_PACKS / GQA, "installed")
    inputs = dict(pack.manifest.fixtures.inputs)
    inputs["q_weight"] = inputs["q_weight"].model_copy(update={"distinct_rows": rows})
    fixtures = pack.manifest.fixtures.model_copy(update={"inputs": inputs})
    with pytest.raises(InputError, match="values to draw") as error:
        draw_inputs(fixtures, pack.signature, "g0", GQA)
    assert str(error.value).startswith("q_weight:") and fix in str(error.value), error.value


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(DRAWN_BEFORE))
def test_the_shipped_packs_draw_the_same_bytes_as_before_sets_were_optional(name: str) -> None:
    pack = read_pack(BUILTIN_PACKS / name, "installed")
    digests = [fixture_digest(draw_inputs(pack.manifest.fixtures, pack.signature, s, name)) for s in SETS]
    assert hashlib.sha256(" ".join(digests).encode()).hexdigest()[:16] == DRAWN_BEFORE[name]
