// name: device-time-by-kernel
// params:
// description: Device runs and simulated device seconds spent per kernel (and on microbenchmarks), with how many failed.
// anchors: DeviceLedger
MATCH (l:DeviceLedger)
RETURN l.consumer AS kernel, l.runs AS runs, l.device_s AS device_s, l.failed_runs AS failed_runs
ORDER BY kernel
