// graphile-worker, driven like the Python peers (see _common.py): one command per run,
// one JSON object on the last stdout line. Runs with the machine's Node.js, from the
// folder the bench installed graphile-worker into (bench/.node/graphile, git-ignored).
//
//   node bench/peers/peer_graphile.mjs COMMAND [--jobs N] [--bulk] [--task T] [--setting S]
//                                               [--burst] [--start N] [--interval S] [--within S]
//
// graphile-worker deletes a job once it succeeds, so "succeeded" is the jobs enqueued
// (counted in a side table, outside the timed enqueue) less the jobs left. It keeps no
// results: the ten_kb task (W13) builds 10 KB and drops it.
import { appendFileSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { parseArgs } from "node:util";

const require = createRequire(process.env.BENCH_GRAPHILE_DIR + "/package.json");
const { makeWorkerUtils, run, runMigrations } = await import(require.resolve("graphile-worker"));
const pg = require("pg");

const DSN = process.env.BENCH_DSN;
const CONCURRENCY = { default: 1, tuned: 16 };
const { values: args, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    jobs: { type: "string", default: "0" },
    bulk: { type: "boolean", default: false },
    task: { type: "string", default: "noop" },
    setting: { type: "string", default: "default" },
    burst: { type: "boolean", default: false },
    start: { type: "string", default: "0" },
    interval: { type: "string", default: "0" },
    within: { type: "string", default: "5" },
  },
});
const jobs = Number(args.jobs);
if (!["noop", "ten_kb"].includes(args.task)) throw new Error(`no task ${args.task}`);
const TEN_KB = 10240;
const silent = new (require("@graphile/logger").Logger)(() => () => {});

async function sql(text, params = []) {
  const client = new pg.Client({ connectionString: DSN });
  await client.connect();
  try {
    return (await client.query(text, params)).rows;
  } finally {
    await client.end();
  }
}

async function counted(n) {
  await sql("INSERT INTO bench_enqueued (n) VALUES ($1)", [n]);
}

function stamp(n) {
  appendFileSync(process.env.BENCH_STAMP_FILE, `${n} ${Date.now() / 1000}\n`);
}

const commands = {
  async setup() {
    await sql("DROP SCHEMA IF EXISTS graphile_worker CASCADE");
    await sql("DROP TABLE IF EXISTS bench_enqueued");
    await sql("CREATE TABLE bench_enqueued (n bigint NOT NULL)");
    await runMigrations({ connectionString: DSN, logger: silent });
  },
  async reset() {
    await sql(
      "TRUNCATE graphile_worker._private_jobs, graphile_worker._private_job_queues, bench_enqueued"
    );
  },
  async enqueue() {
    const utils = await makeWorkerUtils({ connectionString: DSN, logger: silent });
    const start = performance.now();
    try {
      if (args.bulk) {
        const specs = Array.from({ length: jobs }, (_, n) => ({
          identifier: args.task,
          payload: { n },
        }));
        await utils.addJobs(specs);
      } else {
        for (let n = 0; n < jobs; n++) await utils.addJob(args.task, { n });
      }
    } finally {
      var seconds = (performance.now() - start) / 1000;
      await utils.release();
    }
    await counted(jobs);
    return { seconds };
  },
  async stamp() {
    const utils = await makeWorkerUtils({ connectionString: DSN, logger: silent });
    const committed = [];
    const first = Number(args.start);
    const interval = Number(args.interval) * 1000;
    const t0 = Date.now();
    try {
      for (let i = 0; i < jobs; i++) {
        const delay = t0 + i * interval - Date.now();
        if (delay > 0) await new Promise((r) => setTimeout(r, delay));
        await utils.addJob("stamp", { n: first + i });
        committed.push(Date.now() / 1000);
      }
    } finally {
      await utils.release();
    }
    await counted(jobs);
    return { committed };
  },
  async work() {
    const runner = await run({
      connectionString: DSN,
      concurrency: CONCURRENCY[args.setting],
      noHandleSignals: true,
      logger: silent,
      taskList: {
        noop: async () => {},
        // graphile-worker ignores what a (non-batch) task returns: built, then dropped.
        ten_kb: async () => "x".repeat(TEN_KB),
        stamp: async (payload) => stamp(payload.n),
      },
    });
    process.on("SIGTERM", () => runner.stop().then(() => process.exit(0)));
    if (args.burst) {
      // graphile-worker has no drain mode beside runOnce (one job at a time): look, from
      // outside its pool, until no job is left, then stop.
      for (;;) {
        await new Promise((r) => setTimeout(r, 50));
        const [{ left }] = await sql(
          "SELECT count(*)::int AS left FROM graphile_worker._private_jobs"
        );
        if (left === 0) break;
      }
      await runner.stop();
      return null;
    }
    await runner.promise;
    return null;
  },
  async succeeded() {
    const [{ enqueued, left }] = await sql(
      "SELECT (SELECT coalesce(sum(n), 0)::bigint FROM bench_enqueued) AS enqueued," +
        " (SELECT count(*) FROM graphile_worker._private_jobs)::bigint AS left"
    );
    return { succeeded: Number(enqueued) - Number(left) };
  },
  // Count until --jobs have succeeded or --within s have passed: the last count.
  async wait() {
    const deadline = Date.now() + Number(args.within) * 1000;
    for (;;) {
      const { succeeded } = await commands.succeeded();
      if (succeeded >= jobs || Date.now() >= deadline) return { succeeded };
      await new Promise((r) => setTimeout(r, 200));
    }
  },
  async versions() {
    const manifest = `${process.env.BENCH_GRAPHILE_DIR}/node_modules/graphile-worker/package.json`;
    const { version } = JSON.parse(readFileSync(manifest, "utf8"));
    return { versions: { "graphile-worker": version, node: process.versions.node } };
  },
};

const reply = await commands[positionals[0]]();
if (reply) console.log(JSON.stringify(reply));
process.exit(0);
