"""Sample graphs for tests and benchmarks, not used by chiplore itself: `sample` writes a synthetic but
coherent knowledge graph (every node type and relationship of the schema, deterministic from a seed)
and `sample_language` its checked language summary. The conformance and plan tests build it small;
benchmarks/graph_store.py builds it with 100k designs."""
