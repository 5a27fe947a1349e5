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
//   cd examples && npm install
//   PGHOST=/run/postgresql PGDATABASE=app node dispatcher.js --topic api
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

async function dispatcher() {
  const db = new Client();
  await db.connect();
  const q = async (sql, params) => (await db.query(sql, params)).rows;
  const cols = 'SELECT dispatch_key, lease_token, attempt, payload FROM aion_wake.';
  let row = null;
  try {
    while (!stop) {
      if (row === null) { // nothing in hand: claim, blocking while none is claimable
        const got = await q(`${cols}claim($1, 1, '30 s', $2)`, [opt.topic, opt.wait]);
        if (got.length === 0) {
          if (opt.drain && (await q('SELECT FROM aion_wake.outbox WHERE topic = $1 LIMIT 1',
            [opt.topic])).length === 0) stop = true;
          continue;
        }
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

Promise.all(Array.from({ length: Number(opt.dispatchers) }, dispatcher)).catch((e) => {
  console.error('dispatcher.js:', e.message);
  process.exitCode = 1;
});
