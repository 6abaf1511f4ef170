"""Proposers: who designs the next programs of a kernel (builtin or LLM), and what they see."""

from chiplore.agents.proposers.base import DesignProposal, KernelView, Proposer, Role
from chiplore.agents.proposers.builtin import BuiltinArchitect, BuiltinRefiner

__all__ = ["BuiltinArchitect", "BuiltinRefiner", "DesignProposal", "KernelView", "Proposer", "Role"]
