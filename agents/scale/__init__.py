"""The optimization loop on many devices (`chiplore optimize --workers N`).

The driver runs the loop's scheduling as `chiplore.agents.loop` does (per kernel: the baseline, the designs an
earlier run left, then the architect's and the refiner's rounds), but every kernel at once and every
design of a round at once: its free screens run on CPU workers and its device jobs on a pool of
devices, one runner per device, so that every device has work. A round's designs are judged in the
order they were proposed, by the same judge; an A/B comparison's pairs run on one device. All graph
writes stay in the driver, through chiplore.kg.repo, under the designs' leases, which a heartbeat renews.

- `engine`: what the loop needs of an execution engine (run a job on a device, screen a candidate);
- `ray_engine`: Ray's implementation (a device actor per device, CPU tasks for the screens);
- `slots`, `calendar`: which device is free, and the simulated calendar a job starts on;
- `pool_runner`, `screening`: the runner and the screener on top of an engine;
- `loop`: the concurrent loop itself.

`chiplore.agents.loop.optimize` (`--workers 1`) imports none of this, and nothing here imports Ray but
`ray_engine`.
"""
