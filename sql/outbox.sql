--
-- outbox: the row life cycle and its errors.  Re-offers run through
-- aion_wake.reoffer() so that nothing depends on the worker's timing; each
-- scenario uses a topic of its own.
--
-- enqueue is idempotent
SELECT aion_wake.enqueue('e1', '{"n": 1}', 'life');
SELECT aion_wake.enqueue('e1', '{"n": 2}', 'life');
SELECT dispatch_key, topic, payload, attempt, last_error, lease_token, parked_at
  FROM aion_wake.outbox;

-- a delayed row is not claimable before its fence
SELECT aion_wake.enqueue('e2', '{}', 'life', '1 hour');
SELECT visible_after - enqueued_at AS delay FROM aion_wake.outbox WHERE dispatch_key = 'e2';

-- claim: oldest fence first, a lease and a fresh lease_token per row
SELECT aion_wake.enqueue('e0', '{}', 'life', '0');
UPDATE aion_wake.outbox SET visible_after = visible_after - interval '1 minute'
 WHERE dispatch_key = 'e0';
CREATE TEMP TABLE c1 AS SELECT * FROM aion_wake.claim('life', 10, '5 minutes');
SELECT dispatch_key, attempt FROM c1;
SELECT count(DISTINCT lease_token) = count(*) AS tokens_differ,
       bool_and(visible_after > clock_timestamp() + interval '4 minutes') AS leased
  FROM c1;
SELECT count(*) FROM aion_wake.claim('life', 10);

-- complete with a stale token does nothing; with the current one, deletes
SELECT aion_wake.complete('e1', (SELECT lease_token FROM c1 WHERE dispatch_key = 'e1') + 1000);
SELECT aion_wake.complete('e1', (SELECT lease_token FROM c1 WHERE dispatch_key = 'e1'));
SELECT aion_wake.complete('e1');
SELECT aion_wake.complete('never-there');

-- fail: attempt + 1, error kept, fence at clock + backoff
SELECT aion_wake.fail('e0', 'timeout', '10 minutes');
SELECT attempt, last_error, visible_after > clock_timestamp() + interval '9 minutes' AS fenced
  FROM aion_wake.outbox WHERE dispatch_key = 'e0';
SELECT aion_wake.fail('e0', NULL, '0', (SELECT lease_token FROM c1 WHERE dispatch_key = 'e0') - 1);
SELECT aion_wake.fail('e0', NULL, '0');
SELECT attempt, last_error, visible_after <= clock_timestamp() AS visible
  FROM aion_wake.outbox WHERE dispatch_key = 'e0';

-- dead_letter moves the row with its reason
SELECT aion_wake.dead_letter('e0', 'poison');
SELECT dispatch_key, topic, attempt, reason, dead_at IS NOT NULL AS dead
  FROM aion_wake.dead_letters;
SELECT count(*) FROM aion_wake.outbox WHERE dispatch_key = 'e0';
SELECT aion_wake.dead_letter('e0', 'again');

-- park: fence and parked_at written, attempt unchanged, entry confirmed
SELECT aion_wake.enqueue('p1', '{}', 'park');
SELECT aion_wake.enqueue('p2', '{}', 'park');
SELECT aion_wake.enqueue('p3', '{}', 'park');
CREATE TEMP TABLE c2 AS SELECT * FROM aion_wake.claim('park', 3);
SELECT aion_wake.park('p1', '1 hour', (SELECT lease_token FROM c2 WHERE dispatch_key = 'p1'));
SELECT aion_wake.park('p2', '1 hour');
SELECT aion_wake.park('p3', '1 hour');
SELECT aion_wake.park('p3', '1 hour', (SELECT lease_token FROM c2 WHERE dispatch_key = 'p1'));
SELECT aion_wake.park('nope', '1 hour');
SELECT o.dispatch_key, o.attempt, o.parked_at IS NOT NULL AS parked,
       p.state, p.fence = o.visible_after AS same_fence, p.parked_at = o.parked_at AS same_parked_at
  FROM aion_wake.outbox o JOIN aion_wake.parked p USING (dispatch_key)
 WHERE o.topic = 'park' ORDER BY o.parked_at;

-- a re-offer pulls the oldest park forward, once, and leaves attempt alone
SELECT aion_wake.reoffer('park', 1);
SELECT dispatch_key, attempt, parked_at IS NULL AS unparked,
       visible_after <= clock_timestamp() AS visible
  FROM aion_wake.outbox WHERE topic = 'park' ORDER BY dispatch_key;
SELECT dispatch_key FROM aion_wake.parked ORDER BY 1;

-- compare-and-set: a row re-fenced since its park is never pulled forward
UPDATE aion_wake.outbox SET visible_after = visible_after + interval '1 minute'
 WHERE dispatch_key = 'p2';
SELECT aion_wake.reoffer('park', 1);
SELECT dispatch_key, parked_at IS NULL AS unparked, visible_after <= clock_timestamp() AS visible
  FROM aion_wake.outbox WHERE topic = 'park' ORDER BY dispatch_key;
SELECT dispatch_key FROM aion_wake.parked ORDER BY 1;

-- a claim of a parked row clears parked_at and forgets the entry
UPDATE aion_wake.outbox SET visible_after = clock_timestamp() - interval '1 hour'
 WHERE dispatch_key = 'p2';
SELECT dispatch_key, parked_at FROM aion_wake.claim('park', 5);
SELECT count(*) FROM aion_wake.parked;

-- park then ROLLBACK: fence untouched, no entry
CREATE TEMP TABLE before AS SELECT visible_after FROM aion_wake.outbox WHERE dispatch_key = 'p2';
BEGIN;
SELECT aion_wake.park('p2', '2 hours');
SELECT dispatch_key, state FROM aion_wake.parked;
ROLLBACK;
SELECT (SELECT visible_after FROM aion_wake.outbox WHERE dispatch_key = 'p2') =
       (SELECT visible_after FROM before) AS fence_untouched;
SELECT count(*) FROM aion_wake.parked;

-- a re-park that rolls back restores the confirmed entry it replaced
SELECT aion_wake.park('p2', '1 hour');
CREATE TEMP TABLE fence1 AS SELECT fence FROM aion_wake.parked WHERE dispatch_key = 'p2';
BEGIN;
SELECT aion_wake.park('p2', '3 hours');
SELECT state FROM aion_wake.parked WHERE dispatch_key = 'p2';
ROLLBACK;
SELECT state, fence = (SELECT fence FROM fence1) AS old_fence,
       fence = (SELECT visible_after FROM aion_wake.outbox WHERE dispatch_key = 'p2') AS matches_table
  FROM aion_wake.parked WHERE dispatch_key = 'p2';

-- savepoints: the park of a rolled-back subtransaction is forgotten
SELECT aion_wake.enqueue('s1', '{}', 'save');
SELECT aion_wake.enqueue('s2', '{}', 'save');
BEGIN;
SELECT aion_wake.park('s1', '1 hour');
SAVEPOINT a;
SELECT aion_wake.park('s2', '1 hour');
ROLLBACK TO SAVEPOINT a;
SAVEPOINT b;
SELECT aion_wake.park('s1', '2 hours');
RELEASE SAVEPOINT b;
COMMIT;
SELECT p.dispatch_key, p.state, p.fence = o.visible_after AS same_fence
  FROM aion_wake.parked p JOIN aion_wake.outbox o USING (dispatch_key)
 WHERE o.topic = 'save';
SELECT dispatch_key, parked_at IS NULL AS unparked FROM aion_wake.outbox
 WHERE topic = 'save' ORDER BY 1;

-- complete and dead_letter forget parked rows at commit, not before
BEGIN;
SELECT aion_wake.complete('s1');
SELECT count(*) FROM aion_wake.parked WHERE dispatch_key = 's1';
COMMIT;
SELECT count(*) FROM aion_wake.parked WHERE dispatch_key = 's1';

-- a re-offer that rolls back puts its entry back, and its slot with it
-- (G2), so the worker re-offers p2 right after the rollback, in its own
-- time: the entry cannot be looked at in between without a race.  Wait for
-- the worker's re-offer instead: its compare-and-set moves p2 only if the
-- entry came back confirmed, with the fence the table holds
SELECT aion_wake.park('p2', '1 hour');
BEGIN;
SELECT aion_wake.reoffer('park', 1);
SELECT count(*) FROM aion_wake.parked WHERE dispatch_key = 'p2';
ROLLBACK;
CALL wait_reoffered('p2');
SELECT attempt, visible_after <= clock_timestamp() AS visible
  FROM aion_wake.outbox WHERE dispatch_key = 'p2';

-- PREPARE TRANSACTION after park() or pulse() is refused
BEGIN;
SELECT aion_wake.park('p2', '1 hour');
PREPARE TRANSACTION 'aw1';
BEGIN;
SELECT aion_wake.pulse('park');
PREPARE TRANSACTION 'aw2';
SELECT count(*) FROM pg_prepared_xacts;

-- times are the clock at the call, not the transaction's start
BEGIN;
SELECT pg_sleep(0.05);
SELECT aion_wake.enqueue('late', '{}', 'time');
SELECT enqueued_at > now() AS clock_time FROM aion_wake.outbox WHERE dispatch_key = 'late';
SELECT visible_after > now() + interval '30 seconds' AS lease_from_clock
  FROM aion_wake.claim('time', 1, '30 seconds');
COMMIT;

-- a long transaction sees rows made visible after it began
BEGIN;
SELECT count(*) FROM aion_wake.claim('time2');
SELECT aion_wake.enqueue('t2', '{}', 'time2');
SELECT dispatch_key FROM aion_wake.claim('time2');
COMMIT;

-- pulses add up within a transaction and are delivered once, at commit
SELECT pulses_received AS p0, slots_received AS s0 FROM aion_wake.status \gset
BEGIN;
SELECT aion_wake.pulse('nothing-here', 2);
SELECT aion_wake.pulse('nothing-here', 3);
SELECT pulses_received - :p0 AS pulses FROM aion_wake.status;
COMMIT;
SELECT pulses_received - :p0 AS pulses, slots_received - :s0 AS slots FROM aion_wake.status;
BEGIN;
SELECT aion_wake.pulse('nothing-here', 7);
ROLLBACK;
SELECT pulses_received - :p0 AS pulses, slots_received - :s0 AS slots FROM aion_wake.status;

-- bad input
SELECT err($$SELECT aion_wake.enqueue(NULL)$$);
SELECT err($$SELECT aion_wake.enqueue('')$$);
SELECT err($$SELECT aion_wake.enqueue(repeat('k', 256))$$);
SELECT err($$SELECT aion_wake.enqueue('k', NULL)$$);
SELECT err($$SELECT aion_wake.enqueue('k', '{}', 'bad topic')$$);
SELECT err($$SELECT aion_wake.enqueue('k', '{}', NULL)$$);
SELECT err($$SELECT aion_wake.enqueue('k', '{}', 'ok', '-1 second')$$);
SELECT err($$SELECT aion_wake.enqueue('k', '{}', 'ok', NULL)$$);
SELECT err($$SELECT aion_wake.enqueue('k', '{}', 'ok', '2000 years')$$);
SELECT err($$SELECT * FROM aion_wake.claim(NULL)$$);
SELECT err($$SELECT * FROM aion_wake.claim('t', 0)$$);
SELECT err($$SELECT * FROM aion_wake.claim('t', 1000001)$$);
SELECT err($$SELECT * FROM aion_wake.claim('t', NULL)$$);
SELECT err($$SELECT * FROM aion_wake.claim('t', 1, '-1 s')$$);
SELECT err($$SELECT * FROM aion_wake.claim('t', 1, '1 s', '-1 s')$$);
SELECT err($$SELECT aion_wake.complete(NULL)$$);
SELECT err($$SELECT aion_wake.fail(NULL, 'e', '1 s')$$);
SELECT err($$SELECT aion_wake.fail('k', 'e', NULL)$$);
SELECT err($$SELECT aion_wake.fail('k', 'e', '-1 s')$$);
SELECT err($$SELECT aion_wake.park(NULL)$$);
SELECT err($$SELECT aion_wake.park('k', NULL)$$);
SELECT err($$SELECT aion_wake.park('k', '-1 s')$$);
SELECT err($$SELECT aion_wake.dead_letter(NULL, 'r')$$);
SELECT err($$SELECT aion_wake.pulse(NULL)$$);
SELECT err($$SELECT aion_wake.pulse('t', 0)$$);
SELECT err($$SELECT aion_wake.pulse('t', 1000001)$$);
SELECT err($$SELECT aion_wake.pulse('t', NULL)$$);
SELECT err($$SELECT aion_wake.pulse('a:b')$$);
SELECT err($$SELECT aion_wake.reoffer('t', 0)$$);
SELECT err($$INSERT INTO aion_wake.outbox (dispatch_key, topic) VALUES ('x', 'bad topic')$$);
SELECT err($$INSERT INTO aion_wake.outbox (dispatch_key) VALUES ('')$$);
-- the table's check of a topic is the functions' rule: 1 to 63 of
-- [A-Za-z0-9_.-], nothing else, a trailing newline included
BEGIN;
INSERT INTO aion_wake.outbox (dispatch_key, topic) VALUES ('x63', repeat('a', 63));
SELECT err($$INSERT INTO aion_wake.outbox (dispatch_key, topic) VALUES ('x64', repeat('a', 64))$$);
SELECT err($$INSERT INTO aion_wake.outbox (dispatch_key, topic) VALUES ('x0', '')$$);
SELECT err($$INSERT INTO aion_wake.outbox (dispatch_key, topic) VALUES ('xn', E'a\n')$$);
SELECT err($$INSERT INTO aion_wake.outbox (dispatch_key, topic) VALUES ('xc', 'a:b')$$);
ROLLBACK;

-- a blocking claim: refused where it cannot see new rows or would hold an
-- xid; returns at once when a row is there, and nothing when wait passes
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT err($$SELECT * FROM aion_wake.claim('wt', 1, '1 s', '1 s')$$);
COMMIT;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT err($$SELECT * FROM aion_wake.claim('wt', 1, '1 s', '1 s')$$);
COMMIT;
BEGIN;
SELECT aion_wake.enqueue('wt1', '{}', 'wt', '1 hour');
SELECT err($$SELECT * FROM aion_wake.claim('wt', 1, '1 s', '1 s')$$);
COMMIT;
SELECT aion_wake.enqueue('wt2', '{}', 'wt');
SELECT dispatch_key FROM aion_wake.claim('wt', 1, '1 s', '10 s');
SELECT count(*) FROM aion_wake.claim('wt', 1, '1 s', '50 ms');
SELECT waiters FROM aion_wake.status;

-- a transaction that unparks a row (fail) and parks it again, then rolls
-- back, leaves the committed park's entry in place
SELECT aion_wake.enqueue('fp', '{}', 'failpark');
SELECT count(*) FROM aion_wake.claim('failpark');
SELECT aion_wake.park('fp', '10 minutes');
BEGIN;
SELECT aion_wake.fail('fp', 'x', '10 minutes');
SELECT aion_wake.park('fp', '10 minutes');
ROLLBACK;
SELECT p.state, p.fence = o.visible_after AS same_fence, o.attempt
  FROM aion_wake.parked p JOIN aion_wake.outbox o USING (dispatch_key)
 WHERE dispatch_key = 'fp';

-- the per-topic view
SELECT topic, parked, unspent_slots, waiters FROM aion_wake.topics WHERE topic = 'failpark';
