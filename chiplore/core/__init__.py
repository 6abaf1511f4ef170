"""chiplore's bottom layer: the Target and TargetPack protocols and their boundary models, errors,
ids, time, settings types and the registry of parameter keys. It imports nothing of chiplore's own
packages; every other layer (kg, queries, ingest, agents, the simulator, the CLI) stands on it."""
