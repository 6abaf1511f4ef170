"""Roles, policies, design trees, screening, acceptance statistics and the optimization loop."""
