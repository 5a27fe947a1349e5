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

--batch B (1.2): each thread keeps up to B rows in flight.  It claims B rows,
offers them all at once (a pool of B threads), and whenever offers end it
settles those that ended alike in one statement with the batch forms
(complete/fail/dead_letter_many(keys, .., tokens, next_rows => n): n freed
slots take n new rows, offered at once; BUSY -> park_many(keys, .., tokens),
which takes none).  It claims again only once nothing is in flight.  A row
whose lease was lost settles nothing and is skipped: park_many's count says
how many ("stale N of M"); the next_rows forms do not say (they take no row
only when they settled none).

  PGHOST=/run/postgresql PGDATABASE=app python3 dispatcher.py --topic api
  ... python3 dispatcher.py --topic api --batch 16
"""
import argparse
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

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
p.add_argument('--batch', type=int, default=0, help='batched mode: B rows in flight (1.2)')
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


def connect():
    conn = psycopg2.connect(args.conninfo)
    conn.autocommit = True
    cur = conn.cursor()

    def q(sql, *params):  # one statement (autocommit): its rows
        cur.execute(sql, params)
        return cur.fetchall()
    return conn, q


cols = 'SELECT dispatch_key, lease_token, attempt, payload FROM aion_wake.'


def claim(q, n):
    """Claim up to n rows, blocking while none is claimable."""
    got = q(cols + "claim(%s, %s, '30 s', %s)", args.topic, n, args.wait)
    if not got and args.drain and not q(  # --drain: stop when the topic is empty
            "SELECT FROM aion_wake.outbox WHERE topic = %s LIMIT 1", args.topic):
        stop.set()
    return got


def dispatcher():
    conn, q = connect()
    row = None
    while not stop.is_set():
        if row is None:  # nothing in hand: claim, blocking while none is claimable
            got = claim(q, 1)
            if not got:
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


def settle(q, what, rows):
    """Settle rows that ended alike in one statement; return the rows it took."""
    keys, tokens, n = [r[0] for r in rows], [r[1] for r in rows], len(rows)
    if what == 'busy':  # no room: park them all, take nothing
        parked = q("SELECT aion_wake.park_many(%s, %s, %s)",
                   keys, args.backoff, tokens)[0][0]
        took = []
    elif what == 'delivered':  # n slots freed: take up to n rows with them
        took = q(cols + "complete_many(%s, %s, next_rows => %s)",
                 keys, tokens, n)
    elif what == 'dead':
        took = q(cols + "dead_letter_many(%s, %s, %s, next_rows => %s)",
                 keys, 'consumer error', tokens, n)
    else:
        took = q(cols + "fail_many(%s, %s, %s, %s, next_rows => %s)",
                 keys, 'consumer error', args.retry_after, tokens, n)
    with out:
        for key in keys:
            print(what, key)
        if what == 'busy' and parked < n:  # lost leases: those rows are not ours
            print('stale', n - parked, 'of', n)
        sys.stdout.flush()
    return took


def batched():
    conn, q = connect()
    pool = ThreadPoolExecutor(args.batch)  # the offers of one batch run at once
    running = {}  # offer (a future) -> its row
    while not stop.is_set():
        if not running:  # nothing in flight: claim a batch
            got = claim(q, args.batch)
        else:  # settle what has ended, taking as many rows as it freed
            ended, got = {}, []
            for f in wait(running, return_when=FIRST_COMPLETED).done:
                row, outcome = running.pop(f), f.result()
                what = {'ok': 'delivered', 'busy': 'busy'}.get(outcome) or (
                    'dead' if row[2] + 1 >= args.max_attempts else 'failed')
                ended.setdefault(what, []).append(row)
            for what, rows in ended.items():
                got += settle(q, what, rows)
        for row in got:
            running[pool.submit(offer, row[3])] = row
    pool.shutdown()
    conn.close()


target = batched if args.batch > 0 else dispatcher
threads = [threading.Thread(target=target) for _ in range(args.dispatchers)]
for t in threads:
    t.start()
for t in threads:
    t.join()
for e in errors:
    print('dispatcher.py:', e, file=sys.stderr)
sys.exit(1 if errors else 0)
