"""A legality rule's predicate, typed: what a design must satisfy over one of its features.

A target pack's compile probes declare them (`PairProbe.predicate`), learning records each with the
rule it found (`quantity` is the rule's key, `stated` the bound the compiler's message quotes, where it
quotes one), the graph keeps them as JSON (the same bytes for the same predicate, so a rule is
recognised across toolchain versions), and the screens ask each whether a design's features keep it
(`violated_by`). Predicates that state a constraint in words (`Stated`) never refuse a design on their
own: the compiler does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

Number = int | float  # a bound keeps the type the probe found it in (its JSON is the rule's identity)
Features = Mapping[str, object]


class _Predicate(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    quantity: str = ""  # the feature it constrains: the rule's key
    stated: Number | None = None  # the bound the compiler's message quotes, when it quotes one

    def violated_by(self, features: Features) -> str | None:
        """Why a design with these features breaks the rule; None when it keeps it, or does not have
        the quantity."""
        return None

    def with_quantity(self, quantity: str, stated: Number | None = None) -> Predicate:
        """The predicate as a rule records it: over `quantity`, with the compiler's stated bound."""
        update: dict[str, object] = {"quantity": quantity}
        if stated is not None:
            update["stated"] = stated
        return self.model_copy(update=update)  # type: ignore[return-value]

    def json_body(self) -> str:
        """The predicate as the graph keeps it (keys sorted, unset fields left out)."""
        return json.dumps(self.model_dump(exclude_none=True, exclude_defaults=False), sort_keys=True)


class AtMost(_Predicate):
    """The quantity must not exceed `value` (the compiler's `stated` bound wins where it quotes one)."""

    op: Literal["<="] = "<="
    value: Number

    def violated_by(self, features: Features) -> str | None:
        value, limit = features.get(self.quantity), self.stated if self.stated is not None else self.value
        if isinstance(value, int | float) and not isinstance(value, bool) and value > limit:
            return f"{self.quantity} = {value:g} is over the limit {limit:g}"
        return None


class NotIn(_Predicate):
    """None of the quantity's values may be one of `value`."""

    op: Literal["not_in"] = "not_in"
    value: list[Any]

    def violated_by(self, features: Features) -> str | None:
        found = features.get(self.quantity)
        if found is None:
            return None
        values = found if isinstance(found, list | tuple | set | frozenset) else [found]
        bad = sorted(str(v) for v in values if v in self.value)
        return f"{self.quantity} {', '.join(bad)} is refused" if bad else None


class OneOf(_Predicate):
    """The quantity must be one of `value`."""

    op: Literal["in"] = "in"
    value: list[Any]


class MultipleOf(_Predicate):
    """The quantity must be a multiple of `value`."""

    op: Literal["multiple_of"] = "multiple_of"
    value: int


class Unavailable(_Predicate):
    """The construct (`quantity` is `construct.NAME`) does not exist under the version; `instead` says
    what to write."""

    op: Literal["unavailable"] = "unavailable"
    instead: str = ""

    def violated_by(self, features: Features) -> str | None:
        construct = self.quantity.removeprefix("construct.")
        used = features.get("constructs", ())
        if (
            self.quantity.startswith("construct.")
            and isinstance(used, set | frozenset | list | tuple)
            and (construct in used)
        ):
            return f"uses `{construct}`, which this toolchain does not have (use {self.instead or 'another construct'})"
        return None


class Forbidden(_Predicate):
    """A yes/no fact the compiler answered no (`value` true: the thing is refused)."""

    op: Literal["forbidden"] = "forbidden"
    value: bool = True


class Avoid(_Predicate):
    """A diagnostic that came along with a probe's rule: its program is to be avoided, nothing more."""

    op: Literal["avoid"] = "avoid"


class Stated(_Predicate):
    """A constraint the compiler states in words, named by `op` (an order of stages, coverage, a
    declaration before use: whatever a pack calls it); the compiler checks it, the screens do not."""

    op: str
    value: Any = None


# the first that fits: the typed ones by their `op`, anything else a stated constraint
Predicate = Annotated[
    AtMost | NotIn | OneOf | MultipleOf | Unavailable | Forbidden | Avoid | Stated, Field(union_mode="left_to_right")
]
_PREDICATE: TypeAdapter[Predicate] = TypeAdapter(Predicate)


def predicate_of(data: Mapping[str, object] | str) -> Predicate:
    """A predicate from the graph's JSON (or its parsed object); a ValueError names what is wrong."""
    return _PREDICATE.validate_json(data) if isinstance(data, str) else _PREDICATE.validate_python(dict(data))
