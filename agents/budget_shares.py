"""How one optimize run splits its device budget among its kernels."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass
class BudgetShares:
    """Each kernel starts with an equal share of the run's budget, plus its part of what kernels that
    finished before it left unspent: run one after another, a kernel that stops at once (no design space,
    the bound reached) used to keep its share, and `optimize O QKV --budget 60` spent 35 of 60 s. Kernels
    that start together (on many devices) get equal shares, as before."""

    share_s: float  # the run's budget over its kernels
    waiting: int  # kernels not started yet
    carried_s: float = 0.0  # what finished kernels left, not given to a later one yet
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def split(cls, budget_s: float, kernels: int) -> BudgetShares:
        return cls(share_s=budget_s / max(1, kernels), waiting=kernels)

    def take(self) -> float:
        """A starting kernel's budget: its share and its part of what is carried."""
        with self._lock:
            extra = self.carried_s / self.waiting if self.waiting > 0 else 0.0
            self.carried_s -= extra
            self.waiting = max(0, self.waiting - 1)
            return self.share_s + extra

    def give_back(self, budget_s: float, spent_s: float) -> None:
        """A finished kernel's unspent budget, for the kernels that start after it."""
        with self._lock:
            self.carried_s += max(0.0, budget_s - spent_s)
