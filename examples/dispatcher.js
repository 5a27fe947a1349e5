#!/usr/bin/env node
// A dispatcher for aion_wake in Node (pg): README.md's "Wiring a
// dispatcher", in front of a simulated consumer.
//
// Each async loop has its own connection, outside any explicit transaction
// (a transaction per statement): claim a row, blocking while none is
// claimable; offer it to the consumer outside any transaction; then, always
// with the row's lease_token: delivered -> complete() + pulse(topic, 1) for
// the freed slot; BUSY -> park(); error -> fail(), or dead_letter() at
// --max-attempts.  The consumer has C slots, an accepted offer holds one for
// S ms, an offer finding none free is answered BUSY; a row whose payload has
// "poison": true always fails.  Prints "delivered|busy|failed|dead KEY" per
// outcome ("stale KEY": lease lost).  Connects with the PG* environment.
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
const topic = opt.topic;
let busySlots = 0;
let stop = false;

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
  const one = async (sql, params) => Object.values((await db.query(sql, params)).rows[0])[0];
  try {
    while (!stop) {
      const { rows } = await db.query(
        `SELECT dispatch_key, lease_token, attempt, payload
           FROM aion_wake.claim($1, 1, '30 s', $2)`, [topic, opt.wait]);
      if (rows.length === 0) {
        if (opt.drain && await one(
          'SELECT NOT EXISTS (SELECT FROM aion_wake.outbox WHERE topic = $1)', [topic])) stop = true;
        continue;
      }
      const { dispatch_key: key, lease_token: token, attempt, payload } = rows[0];
      const outcome = await offer(payload);
      let what, ok;
      if (outcome === 'ok') {
        what = 'delivered';
        ok = await one('SELECT aion_wake.complete($1, $2), aion_wake.pulse($3, 1)', [key, token, topic]);
      } else if (outcome === 'busy') {
        what = 'busy';
        ok = await one('SELECT aion_wake.park($1, $2, $3)', [key, opt.backoff, token]);
      } else if (attempt + 1 >= Number(opt['max-attempts'])) {
        what = 'dead';
        ok = await one('SELECT aion_wake.dead_letter($1, $2, $3)', [key, 'consumer error', token]);
      } else {
        what = 'failed';
        ok = await one('SELECT aion_wake.fail($1, $2, $3, $4)',
          [key, 'consumer error', opt['retry-after'], token]);
      }
      process.stdout.write(`${ok ? what : 'stale'} ${key}\n`);
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
