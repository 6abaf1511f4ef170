"""The knowledge graph: one GraphStore interface, a Neo4j and an embedded FalkorDB backend."""

from chiplore.kg.store import GraphStore, Record, ServerInfo

__all__ = ["GraphStore", "Record", "ServerInfo"]
