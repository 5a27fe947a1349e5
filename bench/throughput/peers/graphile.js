// bench/throughput/peers/graphile.js -- the burn-down with graphile-worker
// (run.sh, THROUGHPUT_PEERS=1): N no-op jobs added in one transaction
// (graphile_worker.add_job per row in one statement), CHECKPOINT, then a
// worker with the configuration graphile-worker's Performance page states
// for its figures: concurrentJobs 24, maxPoolSize 25, a local queue of 500
// jobs, completeJobBatchDelay 0 and failJobBatchDelay 0 (completions and
// failures batched into one round trip); logging off.  Time from starting
// the runner to the job table's being empty (polled every 5 ms).
// Usage: GW_URL=postgres://... node graphile.js N
const { run, runMigrations, Logger } = require("graphile-worker");
const { Client } = require("pg");
const N = parseInt(process.argv[2] || "20000", 10);
const connectionString = process.env.GW_URL;
const logger = new Logger(() => () => {});

(async () => {
  await runMigrations({ connectionString, logger });
  const c = new Client({ connectionString });
  await c.connect();
  await c.query("DELETE FROM graphile_worker._private_jobs");
  await c.query("VACUUM graphile_worker._private_jobs");
  await c.query(
    `SELECT count(graphile_worker.add_job('noop', '{}'::json)) FROM generate_series(1, ${N})`
  );
  await c.query("CHECKPOINT");
  const preset = {
    worker: {
      connectionString,
      concurrentJobs: 24,
      maxPoolSize: 25,
      localQueue: { size: 500 },
      completeJobBatchDelay: 0,
      failJobBatchDelay: 0,
    },
  };
  const t0 = process.hrtime.bigint();
  const runner = await run({
    preset,
    logger,
    noHandleSignals: true,
    taskList: { noop: async () => {} },
  });
  for (;;) {
    const r = await c.query(
      "SELECT count(*)::int AS n FROM graphile_worker._private_jobs"
    );
    if (r.rows[0].n === 0) break;
    await new Promise((res) => setTimeout(res, 5));
  }
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  await runner.stop();
  await c.end();
  console.log(
    `RESULT mode=graphile phase=burn rows=${N} seconds=${s.toFixed(3)} jobs_s=${Math.round(N / s)}`
  );
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
