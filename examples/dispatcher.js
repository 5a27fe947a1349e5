#!/usr/bin/env node
// A dispatcher for aion_wake in Node (pg): README.md's "Wiring a dispatcher"
// (1.1, capacity unknown), in front of a simulated consumer.
//
// Each async loop has its own connection, a transaction per statement: claim
// a row, blocking while none is claimable; offer it to the consumer outside
// any transaction; then, with the row's lease_token: delivered ->
// complete(.., next_rows => 1), error -> fail(.., next_rows => 1) or at
// --max-attempts dead_letter(.., next_rows => 1): the settle and the next row
// (the oldest parked first) in one statement, offered at once, no claim
// between; BUSY -> park(), then claim.  The consumer has C slots, an offer
// holds one for S ms or is answered BUSY; "poison": true always fails.  Prints
// "delivered|busy|failed|dead KEY" per outcome ("stale KEY": park() lost its
// lease; next_rows forms then return no row, as for none).  PG* environment.
//
// --batch B (1.2): each loop keeps up to B rows in flight.  It claims B rows,
// offers them all at once, and whenever offers end it settles those that
// ended alike in one statement with the batch forms
// (complete/fail/dead_letter_many(keys, .., tokens, next_rows => n): n freed
// slots take n new rows, offered at once; BUSY -> park_many(keys, .., tokens),
// which takes none).  It claims again only once nothing is in flight.  A row
// whose lease was lost settles nothing and is skipped: park_many's count says
// how many ("stale N of M"); the next_rows forms do not say (they take no row
// only when they settled none).
//
//   cd examples && npm install
//   PGHOST=/run/postgresql PGDATABASE=app node dispatcher.js --topic api
//   ... node dispatcher.js --topic api --batch 16
'use strict';

const { Client } = require('pg');
const { parseArgs } = require('node:util');

const { values: opt } = parseArgs({
  options: {
    topic: { type: 'string', default: 'api' },
    dispatchers: { type: 'string', default: '8' },   // async loops
    slots: { type: 'string', default: '4' },          // consumer slots C
    'service-ms': { type: 'string', default: '5' },   // service time S
    backoff: { type: 'string', default: '30 s' },     // BUSY: longest wait if no pulse
    'retry-after': { type: 'string', default: '1 s' }, // back-off after an error
    'max-attempts': { type: 'string', default: '3' },
    wait: { type: 'string', default: '2 s' },         // how long a claim blocks
    drain: { type: 'boolean', default: false },       // stop when the topic is empty
    batch: { type: 'string', default: '0' },          // batched mode: B rows in flight (1.2)
  },
});
let busySlots = 0, stop = false;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// The consumer: hold a free slot for S ms, or answer BUSY.
async function offer(payload) {
  if (busySlots >= Number(opt.slots)) return 'busy';
  busySlots++;
  try {
    await sleep(Number(opt['service-ms']));
    return payload.poison ? 'error' : 'ok';
  } finally {
    busySlots--;
  }
}

const cols = 'SELECT dispatch_key, lease_token, attempt, payload FROM aion_wake.';

// Claim up to n rows, blocking while none is claimable.
async function claim(q, n) {
  const got = await q(`${cols}claim($1, $2, '30 s', $3)`, [opt.topic, n, opt.wait]);
  if (got.length === 0 && opt.drain && (await q( // --drain: stop when the topic is empty
    'SELECT FROM aion_wake.outbox WHERE topic = $1 LIMIT 1', [opt.topic])).length === 0) stop = true;
  return got;
}

async function dispatcher() {
  const db = new Client();
  await db.connect();
  const q = async (sql, params) => (await db.query(sql, params)).rows;
  let row = null;
  try {
    while (!stop) {
      if (row === null) { // nothing in hand: claim, blocking while none is claimable
        const got = await claim(q, 1);
        if (got.length === 0) continue;
        row = got[0];
      }
      const { dispatch_key: key, lease_token: token, attempt, payload } = row;
      const outcome = await offer(payload);
      let what, ok = true, next = [];
      if (outcome === 'ok') {
        what = 'delivered';
        next = await q(`${cols}complete($1, $2, next_rows => 1)`, [key, token]);
      } else if (outcome === 'busy') {
        what = 'busy';
        ok = (await q('SELECT aion_wake.park($1, $2, $3) AS ok', [key, opt.backoff, token]))[0].ok;
      } else if (attempt + 1 >= Number(opt['max-attempts'])) {
        what = 'dead';
        next = await q(`${cols}dead_letter($1, $2, $3, next_rows => 1)`,
          [key, 'consumer error', token]);
      } else {
        what = 'failed';
        next = await q(`${cols}fail($1, $2, $3, $4, next_rows => 1)`,
          [key, 'consumer error', opt['retry-after'], token]);
      }
      process.stdout.write(`${ok ? what : 'stale'} ${key}\n`);
      row = next.length > 0 ? next[0] : null; // the next row, offered at once
    }
  } finally {
    stop = true; // one dead dispatcher stops the run
    await db.end();
  }
}

// Settle rows that ended alike in one statement; return the rows it took.
async function settle(q, what, rows) {
  const keys = rows.map((r) => r.dispatch_key), tokens = rows.map((r) => r.lease_token);
  const n = rows.length;
  let took = [], parked = n;
  if (what === 'busy') { // no room: park them all, take nothing
    parked = (await q('SELECT aion_wake.park_many($1, $2, $3) AS n',
      [keys, opt.backoff, tokens]))[0].n;
  } else if (what === 'delivered') { // n slots freed: take up to n rows with them
    took = await q(`${cols}complete_many($1, $2, next_rows => $3)`, [keys, tokens, n]);
  } else if (what === 'dead') {
    took = await q(`${cols}dead_letter_many($1, $2, $3, next_rows => $4)`,
      [keys, 'consumer error', tokens, n]);
  } else {
    took = await q(`${cols}fail_many($1, $2, $3, $4, next_rows => $5)`,
      [keys, 'consumer error', opt['retry-after'], tokens, n]);
  }
  process.stdout.write(keys.map((k) => `${what} ${k}\n`).join('') +
    (parked < n ? `stale ${n - parked} of ${n}\n` : '')); // lost leases: not ours
  return took;
}

async function batched() {
  const db = new Client();
  await db.connect();
  const q = async (sql, params) => (await db.query(sql, params)).rows;
  const running = new Set(); // offers under way
  const ended = [];          // [row, outcome] of offers that ended, not yet settled
  try {
    while (!stop) {
      let got = [];
      if (running.size === 0 && ended.length === 0) { // nothing in flight: claim a batch
        got = await claim(q, Number(opt.batch));
      } else { // settle what has ended, taking as many rows as it freed
        if (ended.length === 0) await Promise.race(running);
        const alike = {};
        for (const [row, outcome] of ended.splice(0)) {
          const what = outcome === 'ok' ? 'delivered' : outcome === 'busy' ? 'busy'
            : row.attempt + 1 >= Number(opt['max-attempts']) ? 'dead' : 'failed';
          (alike[what] ??= []).push(row);
        }
        for (const [what, rows] of Object.entries(alike)) got.push(...await settle(q, what, rows));
      }
      for (const row of got) { // offer each row at once
        const p = offer(row.payload).then((outcome) => { running.delete(p); ended.push([row, outcome]); });
        running.add(p);
      }
    }
  } finally {
    stop = true; // one dead dispatcher stops the run
    await Promise.all(running);
    await db.end();
  }
}

const loop = Number(opt.batch) > 0 ? batched : dispatcher;
Promise.all(Array.from({ length: Number(opt.dispatchers) }, loop)).catch((e) => {
  console.error('dispatcher.js:', e.message);
  process.exitCode = 1;
});
