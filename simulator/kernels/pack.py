"""A kernel pack read from its folder: `kernel.toml`, `baseline.fe` and, optionally, `reference.py`
(docs/kernels.md).

`read_pack(folder, origin)` reads the files and checks what needs no compiler and no run: the
manifest's fields, the baseline's one kernel (named as the manifest says, its parameter shapes known),
the reference's `reference` function, the fixture recipe against the baseline's parameters, and the
op graph against them. A pack without a reference.py is graded by its op graph's reference
(`chiplore.simulator.execute.graph_reference`). What needs the compiler or the executor is
`validate.validate_pack`'s. Every problem is a `PackProblem` of one line.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import math
import sys
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Literal

from chiplore.core.errors import TargetError, Terminated
from chiplore.core.target import KernelParam, KernelSpec
from chiplore.simulator.cost.bound import weight_bound_cycles
from chiplore.simulator.dsl import ir
from chiplore.simulator.dsl.parser import FerriteSyntaxError
from chiplore.simulator.execute.cases import KernelCase, Reference
from chiplore.simulator.execute.factored import ExecutionError
from chiplore.simulator.execute.graph_reference import graph_reference
from chiplore.simulator.execute.recipe import DEFAULT_SETS
from chiplore.simulator.execute.signature import KernelSignature, kernel_signature
from chiplore.simulator.execute.values import Inputs, Outputs
from chiplore.simulator.kernels import limits
from chiplore.simulator.kernels.manifest import (
    BASELINE,
    MANIFEST,
    REFERENCE,
    Manifest,
    PackProblem,
    listed,
    read_manifest,
)

Origin = Literal["built-in", "CHIPLORE_KERNELS", "installed"]
PACK_FILES = (MANIFEST, BASELINE, REFERENCE)  # what a pack may hold
REQUIRED_FILES = (MANIFEST, BASELINE)  # without a reference.py, the op graph's reference grades
DERIVED_REFERENCE = "the op graph's reference"  # how messages name a reference derived from the graph
# graded once before a design becomes BEST: exact catches bf16 partial sums, cancel cancellation
CHECK_SETS = ("exact", "cancel")


@dataclass(frozen=True, eq=False)
class KernelPack:
    """One pack, read and checked without compiling: what the target builds its kernel from."""

    folder: Path
    origin: Origin
    manifest: Manifest
    baseline: str
    signature: KernelSignature
    reference: Reference
    digest: str  # sha256 over the pack's files: the same digest grades the same way
    derived_reference: bool = False  # no reference.py: the reference is the op graph's

    @property
    def reference_label(self) -> str:
        """The reference as messages name it: reference.py, or the op graph's reference."""
        return DERIVED_REFERENCE if self.derived_reference else REFERENCE

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def weight_names(self) -> tuple[str, ...]:
        """The parameters the op graph's matvecs stream: weights, their scales and global scales."""
        names: dict[str, None] = {}
        for op in self.manifest.ops:
            if op.op == "matvec":
                for name in (op.weight, op.scale, op.global_scale):  # type: ignore[union-attr]
                    if name is not None:
                        names[name] = None
        return tuple(names)

    @cached_property
    def weight_bytes(self) -> int:
        return sum(param_bytes(self.signature.param(name)) for name in self.weight_names)

    @property
    def spec(self) -> KernelSpec:
        """The kernel as the Target offers it; its bound is the weight bytes over the ingress of the
        chip in force now (a pack outlives a CHIPLORE_SIM_TRUTH change: built-in packs are read once
        per process)."""
        return self._spec.model_copy(update={"bound_cycles": weight_bound_cycles(self.weight_bytes)})

    @cached_property
    def _spec(self) -> KernelSpec:
        m = self.manifest
        return KernelSpec(
            name=m.name, description=m.description, label=m.label or m.name, params=self.signature.params,
            axes=self.signature.axes, atol=m.atol, rtol=m.rtol, weight_bytes=self.weight_bytes,
            bound_cycles=weight_bound_cycles(self.weight_bytes), baseline_source=self.baseline, ops=m.graph,
            check_sets=(*CHECK_SETS, *self.own_sets),
        )  # fmt: skip

    @property
    def own_sets(self) -> tuple[str, ...]:
        """The fixture sets the pack's recipe lists besides the device's nine: drawn like `exact` and
        `cancel`, and graded with them once before a design becomes BEST."""
        return tuple(name for name in self.manifest.fixtures.drawable if name not in DEFAULT_SETS)

    @cached_property
    def case(self) -> KernelCase:
        """The kernel as grading sees it. A built-in pack keys its fixtures as the harness always did."""
        m = self.manifest
        key = f"harness:{m.name}" if self.origin == "built-in" else f"pack:{m.name}:{self.digest}"
        return KernelCase(name=m.name, signature=self.signature, recipe=m.fixtures, reference=self._checked_reference,
                          atol=m.atol, rtol=m.rtol, graded=m.graded, key=key)  # fmt: skip

    def _checked_reference(self, inputs: Inputs) -> Outputs:
        """The reference as grading calls it: validation ran it on the smoke set only, so a failure on
        another set is one line naming the pack, not a traceback out of the device."""
        try:
            return self.reference(inputs)
        except Terminated:
            raise
        except (Exception, SystemExit) as error:  # the pack's own code: whatever it raises is the pack's problem
            raise TargetError(f"kernel pack {self.name} ({self.folder}): {self.reference_label} raises "
                              f"{type(error).__name__}: {error}") from None  # fmt: skip


def param_bytes(param: KernelParam) -> int:
    """Bytes the parameter takes in HBM (f4 packs two codes per byte)."""
    return math.ceil(math.prod(size for _, size in param.shape) * ir.DTYPE_BYTES[param.dtype])


def read_pack(folder: Path, origin: Origin) -> KernelPack:
    """The pack in `folder`, checked as far as reading goes (a PackProblem of one line otherwise)."""
    folder = folder.resolve()
    if not folder.is_dir():
        raise PackProblem("not a folder")
    missing = [name for name in REQUIRED_FILES if not (folder / name).is_file()]
    if missing:
        raise PackProblem(f"not a kernel pack: it lacks {', '.join(missing)}")
    manifest = read_manifest(folder)
    baseline = _text(folder / BASELINE)
    signature = _signature(baseline, manifest.name)
    _check_fixtures(manifest, signature)
    _check_graph(manifest, signature)
    digest = _digest(folder)
    derived = not (folder / REFERENCE).is_file()
    if derived:
        reference: Reference = graph_reference(manifest.graph, signature)
    else:
        reference = load_reference(folder / REFERENCE, manifest.name, digest)
    return KernelPack(folder=folder, origin=origin, manifest=manifest, baseline=baseline, signature=signature,
                      reference=reference, digest=digest, derived_reference=derived)  # fmt: skip


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")  # an editor's byte-order mark is not Ferrite
    except UnicodeDecodeError:
        raise PackProblem(f"{path.name} is not UTF-8 text") from None


def _signature(baseline: str, name: str) -> KernelSignature:
    try:
        signature = kernel_signature(baseline)
    except FerriteSyntaxError as error:
        raise PackProblem(f"{BASELINE} does not parse: {error.diagnostic.message}") from None
    except ExecutionError as error:
        raise PackProblem(f"{BASELINE}: {error}") from None
    if signature.name != name:
        raise PackProblem(f"{BASELINE} defines kernel {signature.name}, but {MANIFEST} names {name}")
    if not signature.outputs:
        raise PackProblem(f"kernel {name} has no output (`&mut hbm`) parameter")
    return signature


def _check_fixtures(manifest: Manifest, signature: KernelSignature) -> None:
    recipe = manifest.fixtures
    params = {p.name for p in signature.params}
    unknown = sorted(set(recipe.inputs) - params)
    if unknown:
        raise PackProblem(f"fixtures: kernel {signature.name} has no parameter {', '.join(unknown)}")
    missing = [p.name for p in signature.params if not p.mutable and p.name not in recipe.inputs]
    if missing:
        raise PackProblem(f"fixtures: no recipe for input {', '.join(missing)}")


def _check_graph(manifest: Manifest, signature: KernelSignature) -> None:
    outputs = {p.name for p in signature.outputs}
    problems = manifest.graph.check({p.name for p in signature.params}, outputs)
    if problems:
        raise PackProblem(f"ops: {listed(problems)}")
    graded = [name for name in manifest.graded or () if name not in outputs]
    if graded:
        raise PackProblem(f"graded names {', '.join(graded)}, not an output of kernel {signature.name} "
                          f"(outputs: {', '.join(sorted(outputs))})")  # fmt: skip


def load_reference(path: Path, kernel: str, digest: str) -> Reference:
    """`reference(inputs) -> outputs` from the pack's reference.py, imported under a name of its own."""
    module_name = f"_chiplore_kernel_pack_{kernel}_{digest[:12]}"
    module = sys.modules.get(module_name)
    if module is None:
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise PackProblem(f"{REFERENCE} cannot be imported")
        module = importlib.util.module_from_spec(spec)
        try:
            with limits.time_limit(limits.REFERENCE_LIMIT_S):
                spec.loader.exec_module(module)
        except limits.OutOfTime:
            limit = limits.REFERENCE_LIMIT_S
            raise PackProblem(f"{REFERENCE} does not finish importing within {limit:.0f} s") from None
        except Terminated:
            raise
        except ModuleNotFoundError as error:
            hint = ""
            if (error.name or "").split(".")[0] in ("simulator", "kg", "agents", "ingest", "queries"):
                hint = f" (chiplore's modules are under chiplore.: import chiplore.{error.name})"
            raise PackProblem(f"{REFERENCE} fails to import: ModuleNotFoundError: {error}{hint}") from None
        except (Exception, SystemExit) as error:  # the pack's own code: whatever it raises is the pack's problem
            raise PackProblem(f"{REFERENCE} fails to import: {type(error).__name__}: {error}") from None
        sys.modules[module_name] = module
    function = getattr(module, "reference", None)
    if not callable(function):
        raise PackProblem(f"{REFERENCE} defines no function `reference(inputs)`")
    try:
        inspect.signature(function).bind({})
    except (TypeError, ValueError):
        raise PackProblem(f"{REFERENCE}: `reference` must take one argument, the inputs") from None
    return function  # type: ignore[no-any-return]


def _digest(folder: Path) -> str:
    sha = hashlib.sha256()
    for name in PACK_FILES:
        if (folder / name).is_file():  # a pack of all three files digests as it did before reference.py was optional
            sha.update(name.encode() + b"\0" + (folder / name).read_bytes() + b"\0")
    return sha.hexdigest()
