"""Typed repository functions: with queries/, the only places Cypher is written."""
