// name: device-time-by-kernel
// params:
// description: Device runs and simulated device seconds spent per kernel, with how many failed.
MATCH (r:DeviceRun)
RETURN r.kernel AS kernel, count(r) AS runs, sum(r.device_s) AS device_s,
       sum(CASE WHEN r.status = 'ok' THEN 0 ELSE 1 END) AS failed_runs
ORDER BY kernel
