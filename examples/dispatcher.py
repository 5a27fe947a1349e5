#!/usr/bin/env python3
"""A dispatcher for aion_wake in Python (psycopg2): README.md's "Wiring a
dispatcher", in front of a simulated consumer.

Each thread has its own connection in autocommit (a transaction per
statement): claim a row, blocking while none is claimable; offer it to the
consumer outside any transaction; then, always with the row's lease_token:
delivered -> complete() + pulse(topic, 1) for the freed slot; BUSY -> park();
error -> fail(), or dead_letter() at --max-attempts.  The consumer has C
slots, an accepted offer holds one for S ms, an offer finding none free is
answered BUSY; a row whose payload has "poison": true always fails.  Prints
"delivered|busy|failed|dead KEY" per outcome ("stale KEY": lease lost).

  PGHOST=/run/postgresql PGDATABASE=app python3 dispatcher.py --topic api
"""
import argparse
import sys
import threading
import time

import psycopg2

p = argparse.ArgumentParser(description='aion_wake dispatcher (README wiring)')
p.add_argument('--conninfo', default='', help='libpq string (default: PG* env)')
p.add_argument('--topic', default='api')
p.add_argument('--dispatchers', type=int, default=8, help='threads')
p.add_argument('--slots', type=int, default=4, help='consumer slots C')
p.add_argument('--service-ms', type=int, default=5, help='service time S')
p.add_argument('--backoff', default='30 s', help='BUSY: longest wait if no pulse')
p.add_argument('--retry-after', default='1 s', help='back-off after an error')
p.add_argument('--max-attempts', type=int, default=3)
p.add_argument('--wait', default='2 s', help='how long a claim blocks')
p.add_argument('--drain', action='store_true', help='stop when the topic is empty')
args = p.parse_args()

slots = threading.BoundedSemaphore(args.slots)
out = threading.Lock()
stop = threading.Event()
errors = []
threading.excepthook = lambda a: (errors.append(a.exc_value), stop.set())  # stop all


def offer(payload):
    """The consumer: hold a free slot for S ms, or answer BUSY."""
    if not slots.acquire(blocking=False):
        return 'busy'
    try:
        time.sleep(args.service_ms / 1000.0)
        return 'error' if payload.get('poison') else 'ok'
    finally:
        slots.release()


def dispatcher():
    conn = psycopg2.connect(args.conninfo)
    conn.autocommit = True
    cur = conn.cursor()

    def one(sql, *params):
        cur.execute(sql, params)
        return cur.fetchone()[0]

    while not stop.is_set():
        cur.execute("SELECT dispatch_key, lease_token, attempt, payload"
                    " FROM aion_wake.claim(%s, 1, '30 s', %s)", (args.topic, args.wait))
        row = cur.fetchone()
        if row is None:
            if args.drain and one("SELECT NOT EXISTS (SELECT FROM aion_wake.outbox"
                                  " WHERE topic = %s)", args.topic):
                stop.set()
            continue
        key, token, attempt, payload = row
        outcome = offer(payload)
        if outcome == 'ok':
            what, ok = 'delivered', one("SELECT aion_wake.complete(%s, %s), "
                                        "aion_wake.pulse(%s, 1)", key, token, args.topic)
        elif outcome == 'busy':
            what, ok = 'busy', one("SELECT aion_wake.park(%s, %s, %s)",
                                   key, args.backoff, token)
        elif attempt + 1 >= args.max_attempts:
            what, ok = 'dead', one("SELECT aion_wake.dead_letter(%s, %s, %s)",
                                   key, 'consumer error', token)
        else:
            what, ok = 'failed', one("SELECT aion_wake.fail(%s, %s, %s, %s)",
                                     key, 'consumer error', args.retry_after, token)
        with out:
            print(what if ok else 'stale', key, flush=True)
    conn.close()


threads = [threading.Thread(target=dispatcher) for _ in range(args.dispatchers)]
for t in threads:
    t.start()
for t in threads:
    t.join()
for e in errors:
    print('dispatcher.py:', e, file=sys.stderr)
sys.exit(1 if errors else 0)
