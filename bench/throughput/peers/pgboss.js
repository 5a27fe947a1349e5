// bench/throughput/peers/pgboss.js -- the burn-down with pg-boss (run.sh,
// THROUGHPUT_PEERS=1): N no-op jobs inserted in one statement
// (boss.insert), CHECKPOINT, then one work() with the settings pg-boss's
// own option documentation (types.d.ts, JobPollingOptions and
// WorkConcurrencyOptions) gives for draining a backlog: localConcurrency
// workers (the burn-down's worker count) each fetching batchSize jobs
// (the batch modes' B) and completing each batch in one statement,
// burstWhenBatchFull (a worker whose fetch came back full fetches again at
// once instead of waiting out its polling interval) and the shortest
// polling interval it accepts, 0.5 s.  Time from work() to no job of the
// queue left in created, retry or active state (polled every 5 ms);
// completed jobs stay in pgboss.job, as pg-boss keeps them by default.
// Usage: PB_URL=postgres://... node pgboss.js N WORKERS BATCH
const { PgBoss } = require("pg-boss");
const { Client } = require("pg");
const N = parseInt(process.argv[2] || "20000", 10);
const WORKERS = parseInt(process.argv[3] || "16", 10);
const BATCH = parseInt(process.argv[4] || "100", 10);
const connectionString = process.env.PB_URL;
const queue = "noop";

(async () => {
  const boss = new PgBoss({ connectionString, max: WORKERS + 4 });
  boss.on("error", (e) => {
    console.error(e);
    process.exit(1);
  });
  await boss.start();
  await boss.deleteQueue(queue).catch(() => {});
  await boss.createQueue(queue);
  const jobs = [];
  for (let i = 0; i < N; i++) jobs.push({ data: {} });
  await boss.insert(queue, jobs);
  const c = new Client({ connectionString });
  await c.connect();
  const left = async () =>
    (
      await c.query(
        "SELECT count(*)::int AS n FROM pgboss.job WHERE name = $1 AND state IN ('created', 'retry', 'active')",
        [queue]
      )
    ).rows[0].n;
  if ((await left()) !== N) throw new Error("the jobs were not all inserted");
  await c.query("CHECKPOINT");
  const t0 = process.hrtime.bigint();
  await boss.work(
    queue,
    {
      batchSize: BATCH,
      localConcurrency: WORKERS,
      burstWhenBatchFull: true,
      pollingIntervalSeconds: 0.5,
    },
    async () => {}
  );
  while ((await left()) !== 0) await new Promise((res) => setTimeout(res, 5));
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  await boss.stop({ graceful: false });
  await c.end();
  console.log(
    `RESULT mode=pgboss phase=burn rows=${N} seconds=${s.toFixed(3)} jobs_s=${Math.round(N / s)}`
  );
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
