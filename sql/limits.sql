--
-- limits: the 1.1 interface -- set_limit(), aion_wake.limits, claims within
-- a limit, claim(topics[]), the settle-and-claim forms (next_rows), and the
-- views' new columns -- with every error path and its SQLSTATE.  Timing,
-- wakes and concurrency are held by the isolation specs and TAP tests.
--

-- set_limit: bad input
SELECT err($$SELECT aion_wake.set_limit(NULL, 2)$$);
SELECT err($$SELECT aion_wake.set_limit('bad topic', 2)$$);
SELECT err($$SELECT aion_wake.set_limit('lim', 0)$$);
SELECT err($$SELECT aion_wake.set_limit('lim', 1000001)$$);
SELECT err($$SELECT aion_wake.set_limit('lim', -1)$$);

-- set_limit applies at commit, and not after a rollback
BEGIN;
SELECT aion_wake.set_limit('lim', 2);
SELECT max_in_flight FROM aion_wake.topics WHERE topic = 'lim';
ROLLBACK;
SELECT count(*) FROM aion_wake.limits;
SELECT aion_wake.set_limit('lim', 2);
SELECT topic, max_in_flight, updated_at <= clock_timestamp() AS dated FROM aion_wake.limits;
SELECT topic, max_in_flight, in_flight FROM aion_wake.topics WHERE topic = 'lim';

-- a claim takes at most max_in_flight - live leases
SELECT count(aion_wake.enqueue('lim' || g, '{}', 'lim')) FROM generate_series(1, 5) g;
SELECT dispatch_key, lease_token IS NOT NULL AS leased, leased_until = visible_after AS lease_recorded
  FROM aion_wake.claim('lim', 5) ORDER BY 1;
SELECT in_flight FROM aion_wake.topics WHERE topic = 'lim';
SELECT count(*) AS nothing_more FROM aion_wake.claim('lim', 5);

-- a settle releases the slot at commit; a rolled-back one does not
BEGIN;
SELECT aion_wake.complete('lim1');
SELECT in_flight FROM aion_wake.topics WHERE topic = 'lim';
ROLLBACK;
SELECT in_flight FROM aion_wake.topics WHERE topic = 'lim';
SELECT aion_wake.complete('lim1');
SELECT in_flight FROM aion_wake.topics WHERE topic = 'lim';
-- a stale token settles nothing and releases nothing
SELECT aion_wake.complete('lim2', -1), aion_wake.fail('lim2', 'x', '0', -1),
       aion_wake.park('lim2', '1 hour', -1), aion_wake.dead_letter('lim2', 'x', -1);
SELECT in_flight FROM aion_wake.topics WHERE topic = 'lim';

-- fail and park clear leased_until; dead letters carry it, null, last
SELECT aion_wake.fail('lim2', 'boom', '1 hour');
SELECT dispatch_key, leased_until IS NULL AS cleared, attempt FROM aion_wake.outbox WHERE dispatch_key = 'lim2';
SELECT in_flight FROM aion_wake.topics WHERE topic = 'lim';
SELECT count(*) FROM aion_wake.claim('lim', 5);
SELECT aion_wake.dead_letter('lim3', 'gone');
SELECT dispatch_key, leased_until IS NULL AS no_lease FROM aion_wake.dead_letters WHERE dispatch_key = 'lim3';
SELECT attname FROM pg_attribute
 WHERE attrelid = 'aion_wake.dead_letters'::regclass AND attnum > 0 AND NOT attisdropped
 ORDER BY attnum DESC LIMIT 2;

-- settle and claim the next row in one statement: the slot passes on
SELECT dispatch_key, lease_token AS tok FROM aion_wake.outbox
 WHERE topic = 'lim' AND leased_until > clock_timestamp() ORDER BY 1 LIMIT 1 \gset
SELECT dispatch_key AS next_key, lease_token IS NOT NULL AS leased
  FROM aion_wake.complete(:'dispatch_key', :tok, next_rows => 1);
SELECT in_flight FROM aion_wake.topics WHERE topic = 'lim';
-- a stale token takes nothing
SELECT count(*) FROM aion_wake.complete('lim5', -1, next_rows => 1);
-- bad input
SELECT err($$SELECT * FROM aion_wake.complete('lim5', NULL, next_rows => -1)$$);
SELECT err($$SELECT * FROM aion_wake.complete('lim5', NULL, next_rows => 1000001)$$);
SELECT err($$SELECT * FROM aion_wake.complete('lim5', NULL, next_rows => NULL)$$);
SELECT err($$SELECT * FROM aion_wake.park('lim5', '1 hour', NULL, 1, lease => '-1 s')$$);

-- the hand-off never spends the freed slot on the settled row's own park:
-- a parked row whose token still matches is failed (then completed) with
-- next_rows; the next park is taken, and after a rollback both parks are
-- still in the set, confirmed
SELECT count(aion_wake.enqueue('own' || g, '{}', 'own')) FROM generate_series(1, 2) g;
SELECT count(*) FROM aion_wake.claim('own', 2);
SELECT lease_token AS tok1 FROM aion_wake.outbox WHERE dispatch_key = 'own1' \gset
SELECT lease_token AS tok2 FROM aion_wake.outbox WHERE dispatch_key = 'own2' \gset
SELECT aion_wake.park('own1', '1 hour', :tok1);
SELECT aion_wake.park('own2', '1 hour', :tok2);
BEGIN;
SELECT dispatch_key, attempt FROM aion_wake.fail('own1', 'x', '1 hour', :tok1, next_rows => 1);
ROLLBACK;
SELECT dispatch_key, state FROM aion_wake.parked WHERE topic = 'own' ORDER BY 1;
SELECT dispatch_key, attempt FROM aion_wake.complete('own1', :tok1, next_rows => 1);
SELECT count(*) AS left_in_set FROM aion_wake.parked WHERE topic = 'own';

-- removing the limit: the topic is unlimited, in_flight is null
SELECT aion_wake.set_limit('lim', NULL);
SELECT count(*) FROM aion_wake.limits;
SELECT topic, max_in_flight, in_flight FROM aion_wake.topics WHERE topic = 'lim';

-- claim(topics[]): oldest fence first across topics, each within its limit
-- (each enqueue is a statement of its own: the fences follow this order)
SELECT aion_wake.enqueue('mb1', '{}', 'mb');
SELECT aion_wake.enqueue('ma1', '{}', 'ma');
SELECT aion_wake.enqueue('mb2', '{}', 'mb');
SELECT aion_wake.enqueue('ma2', '{}', 'ma');
SELECT aion_wake.enqueue('ma3', '{}', 'ma');
SELECT aion_wake.set_limit('mb', 1);
SELECT dispatch_key FROM aion_wake.claim(ARRAY['ma', 'mb', 'ma'], 2) ORDER BY 1;
SELECT dispatch_key FROM aion_wake.claim(ARRAY['mb', 'ma'], 5) ORDER BY 1;
SELECT topic, in_flight FROM aion_wake.topics WHERE topic = 'mb';
-- bad input: nothing registered, nothing claimed
SELECT err($$SELECT * FROM aion_wake.claim(NULL::text[])$$);
SELECT err($$SELECT * FROM aion_wake.claim(ARRAY[]::text[])$$);
SELECT err($$SELECT * FROM aion_wake.claim(ARRAY['ma', NULL])$$);
SELECT err($$SELECT * FROM aion_wake.claim(ARRAY['ma', 'no good'])$$);
SELECT err($$SELECT * FROM aion_wake.claim(ARRAY[['ma'], ['mb']])$$);
SELECT err(format($$SELECT * FROM aion_wake.claim(%L::text[])$$,
				  (SELECT array_agg('t' || g) FROM generate_series(1, 65) g)));
SELECT err(format($$SELECT * FROM aion_wake.claim(%L::text[])$$,
				  (SELECT array_agg('t' || g) FROM generate_series(1, 64) g)));
SELECT err(format($$SELECT * FROM aion_wake.claim(%L::text[])$$,
				  (SELECT array_agg('t' || (g % 64)) FROM generate_series(1, 100) g)));
SELECT waiters FROM aion_wake.status;

-- the status view's 1.1 columns
SELECT lease_capacity > 0 AS has_pool, leases >= 0 AS counts, leases_expired >= 0 AS expiries,
       pulses_ignored >= 0 AS ignored FROM aion_wake.status;

-- the hand-off inside one transaction: a claim after a settle inherits
-- its slot; a settle rolled back to a savepoint passes nothing on, and the
-- next transaction starts clean
SELECT aion_wake.set_limit('hx', 1);
SELECT aion_wake.enqueue('hx' || g, '{}', 'hx') FROM generate_series(1, 3) g;
SELECT dispatch_key AS hx_key, lease_token AS hx_token FROM aion_wake.claim('hx') \gset
BEGIN;
SAVEPOINT s;
SELECT aion_wake.complete(:'hx_key', :hx_token);
ROLLBACK TO SAVEPOINT s;
SELECT count(*) AS nothing_passed FROM aion_wake.claim('hx');
COMMIT;
SELECT count(*) AS still_full FROM aion_wake.claim('hx');
BEGIN;
SELECT aion_wake.complete(:'hx_key', :hx_token);
SELECT dispatch_key AS next_row FROM aion_wake.claim('hx', 5);
SELECT in_flight FROM aion_wake.topics WHERE topic = 'hx';
COMMIT;
SELECT in_flight FROM aion_wake.topics WHERE topic = 'hx';
SELECT count(*) AS full_again FROM aion_wake.claim('hx');

-- set_limit() counts the leases its own transaction takes after it
SELECT aion_wake.enqueue('hy' || g, '{}', 'hy') FROM generate_series(1, 3) g;
BEGIN;
SELECT aion_wake.set_limit('hy', 1);
SELECT count(*) AS taken FROM aion_wake.claim('hy', 2);
COMMIT;
SELECT max_in_flight, in_flight FROM aion_wake.topics WHERE topic = 'hy';
SELECT count(*) AS over_limit FROM aion_wake.claim('hy');

SELECT aion_wake.set_limit('mb', NULL);
SELECT aion_wake.set_limit('hx', NULL);
SELECT aion_wake.set_limit('hy', NULL);
DELETE FROM aion_wake.outbox;

-- a lease settled twice in one transaction is settled once: its slot
-- passes to one new lease, not two.  Each case on a topic of its own with
-- a limit of 1 and one live lease: fail then dead_letter; fail then
-- complete with next_rows; across savepoints; the first settle rolled
-- back to a savepoint (then the next one counts)
SELECT aion_wake.set_limit('dd' || g, 1) FROM generate_series(1, 4) g;
SELECT count(aion_wake.enqueue('dd' || t || '_' || g, '{}', 'dd' || t))
  FROM generate_series(1, 4) t, generate_series(1, 4) g;
SELECT count(*) FROM aion_wake.claim(ARRAY['dd1', 'dd2', 'dd3', 'dd4'], 4, '1 hour');
CREATE TEMP TABLE dd_lease AS
  SELECT topic, dispatch_key AS k, lease_token AS tok FROM aion_wake.outbox
   WHERE topic LIKE 'dd_' AND leased_until > clock_timestamp();
SELECT topic, count(*) FROM dd_lease GROUP BY 1 ORDER BY 1;
SELECT k AS dd_key, tok AS dd_tok FROM dd_lease WHERE topic = 'dd1' \gset
BEGIN;
SELECT aion_wake.fail(:'dd_key', 'x', '1 hour', :dd_tok);
SELECT aion_wake.dead_letter(:'dd_key', 'x', :dd_tok);
SELECT count(*) AS handed_one FROM aion_wake.claim('dd1', 2, '1 hour');
COMMIT;
SELECT k AS dd_key, tok AS dd_tok FROM dd_lease WHERE topic = 'dd2' \gset
BEGIN;
SELECT aion_wake.fail(:'dd_key', 'x', '1 hour', :dd_tok);
SELECT count(*) AS handed_one FROM aion_wake.complete(:'dd_key', :dd_tok, next_rows => 3, lease => '1 hour');
COMMIT;
SELECT k AS dd_key, tok AS dd_tok FROM dd_lease WHERE topic = 'dd3' \gset
BEGIN;
SAVEPOINT a;
SELECT aion_wake.fail(:'dd_key', 'x', '1 hour', :dd_tok);
RELEASE SAVEPOINT a;
SAVEPOINT b;
SELECT aion_wake.dead_letter(:'dd_key', 'x', :dd_tok);
ROLLBACK TO SAVEPOINT b;
SELECT aion_wake.complete(:'dd_key', :dd_tok);
SELECT count(*) AS handed_one FROM aion_wake.claim('dd3', 2, '1 hour');
COMMIT;
SELECT k AS dd_key, tok AS dd_tok FROM dd_lease WHERE topic = 'dd4' \gset
BEGIN;
SAVEPOINT a;
SELECT aion_wake.park(:'dd_key', '1 hour', :dd_tok);
ROLLBACK TO SAVEPOINT a;
SELECT aion_wake.fail(:'dd_key', 'x', '1 hour', :dd_tok);
SELECT aion_wake.dead_letter(:'dd_key', 'x', :dd_tok);
SELECT count(*) AS handed_one FROM aion_wake.claim('dd4', 2, '1 hour');
COMMIT;
SELECT topic, in_flight FROM aion_wake.topics WHERE topic LIKE 'dd_' ORDER BY 1;
SELECT count(*) AS full FROM aion_wake.claim(ARRAY['dd1', 'dd2', 'dd3', 'dd4'], 4, '1 hour');
DROP TABLE dd_lease;

-- a row settled and taken again by its own transaction (fail or park with
-- no back-off, then a claim), then rolled back: its first lease is live
-- again, and counted; no lease ended.  Then committed: the new lease holds
-- the slot.  rt2 stays fenced until the checks that the topic is full.
SELECT aion_wake.set_limit('rt', 1);
SELECT aion_wake.enqueue('rt1', '{}', 'rt');
SELECT dispatch_key AS rt_key, lease_token AS rt_tok FROM aion_wake.claim('rt', 1, '1 hour') \gset
SELECT aion_wake.enqueue('rt2', '{}', 'rt', '1 hour');
SELECT leases_expired AS expired_before FROM aion_wake.status \gset
BEGIN;
SELECT aion_wake.fail(:'rt_key', 'x', '0', :rt_tok);
SELECT dispatch_key = :'rt_key' AS same_row, lease_token <> :rt_tok AS new_token
  FROM aion_wake.claim('rt', 1, '1 hour');
ROLLBACK;
SELECT in_flight FROM aion_wake.topics WHERE topic = 'rt';
BEGIN;
SELECT aion_wake.park(:'rt_key', '0', :rt_tok);
SELECT dispatch_key = :'rt_key' AS same_row FROM aion_wake.claim('rt', 1, '1 hour');
ROLLBACK;
SELECT in_flight FROM aion_wake.topics WHERE topic = 'rt';
BEGIN;
UPDATE aion_wake.outbox SET visible_after = clock_timestamp() WHERE dispatch_key = 'rt2';
SELECT count(*) AS full FROM aion_wake.claim('rt', 1, '1 hour');
ROLLBACK;
SELECT leases_expired - :expired_before AS expired FROM aion_wake.status;
BEGIN;
SELECT aion_wake.fail(:'rt_key', 'x', '0', :rt_tok);
SELECT dispatch_key = :'rt_key' AS same_row FROM aion_wake.claim('rt', 1, '1 hour');
COMMIT;
SELECT in_flight FROM aion_wake.topics WHERE topic = 'rt';
UPDATE aion_wake.outbox SET visible_after = clock_timestamp() WHERE dispatch_key = 'rt2';
SELECT count(*) AS full FROM aion_wake.claim('rt', 1, '1 hour');
SELECT leases_expired - :expired_before AS expired FROM aion_wake.status;

-- two set_limit() calls in one transaction end as the last one alone
-- would, live leases counted
SELECT aion_wake.set_limit('sl', 5);
SELECT count(aion_wake.enqueue('sl' || g, '{}', 'sl')) FROM generate_series(1, 9) g;
SELECT count(*) FROM aion_wake.claim('sl', 5, '1 hour');
BEGIN;
SELECT aion_wake.set_limit('sl', NULL);
SELECT aion_wake.set_limit('sl', 3);
COMMIT;
SELECT max_in_flight, in_flight FROM aion_wake.topics WHERE topic = 'sl';
SELECT count(*) AS over_limit FROM aion_wake.claim('sl', 5, '1 hour');
BEGIN;
SELECT aion_wake.set_limit('sl', 4);
SAVEPOINT a;
SELECT aion_wake.set_limit('sl', NULL);
ROLLBACK TO SAVEPOINT a;
COMMIT;
SELECT max_in_flight, in_flight FROM aion_wake.topics WHERE topic = 'sl';
SELECT count(*) AS over_limit FROM aion_wake.claim('sl', 5, '1 hour');
BEGIN;
SELECT aion_wake.set_limit('sl', 6);
SELECT aion_wake.set_limit('sl', NULL);
COMMIT;
SELECT max_in_flight, in_flight FROM aion_wake.topics WHERE topic = 'sl';
SELECT count(*) FROM aion_wake.limits WHERE topic = 'sl';
-- from no limit: the live leases are counted by the last call too
BEGIN;
SELECT aion_wake.set_limit('sl', 2);
SELECT aion_wake.set_limit('sl', NULL);
SELECT aion_wake.set_limit('sl', 6);
COMMIT;
SELECT max_in_flight, in_flight, in_flight = (SELECT count(*) FROM aion_wake.outbox
   WHERE topic = 'sl' AND leased_until > clock_timestamp())::int AS counted
  FROM aion_wake.topics WHERE topic = 'sl';
SELECT count(*) AS one_left FROM aion_wake.claim('sl', 5, '1 hour');

-- intervals: at most 1000 years, a month counting as 30 days
SELECT err($$SELECT * FROM aion_wake.claim('iv', 1, '1013 years')$$);
SELECT err($$SELECT * FROM aion_wake.claim('iv', 1, '1000 years 1 microsecond')$$);
SELECT err($$SELECT * FROM aion_wake.claim('iv', 1, '360001 days')$$);
SELECT err($$SELECT * FROM aion_wake.claim('iv', 1, '1000 years')$$);
SELECT err($$SELECT aion_wake.enqueue('iv', '{}', 'iv', '11999 months 30 days')$$);

SELECT aion_wake.set_limit('dd' || g, NULL) FROM generate_series(1, 4) g;
SELECT aion_wake.set_limit('rt', NULL);
SELECT aion_wake.set_limit('sl', NULL);
DELETE FROM aion_wake.outbox;
