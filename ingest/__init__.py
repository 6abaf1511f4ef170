"""Knowledge acquisition: docs, microbenchmarks and compiler probes into the graph."""
