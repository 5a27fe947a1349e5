#!/usr/bin/env python3
"""A dispatcher for aion_wake in Python (psycopg2): README.md's "Wiring a
dispatcher" (1.1, capacity unknown), in front of a simulated consumer.

Each thread has its own connection in autocommit: claim a row, blocking while
none is claimable; offer it to the consumer outside any transaction; then,
with the row's lease_token: delivered -> complete(.., next_rows => 1), error
-> fail(.., next_rows => 1) or at --max-attempts dead_letter(.., next_rows =>
1): the settle and the next row (the oldest parked first) in one statement,
offered at once, no claim between; BUSY -> park(), then claim.  The consumer
has C slots, an offer holds one for S ms or is answered BUSY; "poison": true
always fails.  Prints "delivered|busy|failed|dead KEY" per outcome ("stale
KEY": park() lost its lease; next_rows forms then return no row, as for none).

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

    def q(sql, *params):  # one statement (autocommit): its rows
        cur.execute(sql, params)
        return cur.fetchall()
    cols, row = 'SELECT dispatch_key, lease_token, attempt, payload FROM aion_wake.', None
    while not stop.is_set():
        if row is None:  # nothing in hand: claim, blocking while none is claimable
            got = q(cols + "claim(%s, 1, '30 s', %s)", args.topic, args.wait)
            if not got:  # --drain: stop when the topic is empty
                if args.drain and not q(
                        "SELECT FROM aion_wake.outbox WHERE topic = %s LIMIT 1", args.topic):
                    stop.set()
                continue
            row = got[0]
        key, token, attempt, payload = row
        outcome, ok, nxt = offer(payload), True, []
        if outcome == 'ok':
            what, nxt = 'delivered', q(cols + "complete(%s, %s, next_rows => 1)", key, token)
        elif outcome == 'busy':
            what, ok = 'busy', q("SELECT aion_wake.park(%s, %s, %s)",
                                 key, args.backoff, token)[0][0]
        elif attempt + 1 >= args.max_attempts:
            what, nxt = 'dead', q(cols + "dead_letter(%s, %s, %s, next_rows => 1)",
                                     key, 'consumer error', token)
        else:
            what, nxt = 'failed', q(cols + "fail(%s, %s, %s, %s, next_rows => 1)",
                                       key, 'consumer error', args.retry_after, token)
        with out:
            print(what if ok else 'stale', key, flush=True)
        row = nxt[0] if nxt else None  # the next row, offered at once
    conn.close()


threads = [threading.Thread(target=dispatcher) for _ in range(args.dispatchers)]
for t in threads:
    t.start()
for t in threads:
    t.join()
for e in errors:
    print('dispatcher.py:', e, file=sys.stderr)
sys.exit(1 if errors else 0)
