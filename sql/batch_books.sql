--
-- batch_books: the books of limited topics under batch settles (1.2) in
-- the schedules a single session can make: a batch whose keys span two
-- limited topics and an unlimited one, with next_rows above and below the
-- rows settled; a hand-off rolled back to a savepoint; two batches in one
-- transaction over disjoint and then the same keys; a limit lowered by
-- the batch's own transaction; parked rows settled by a batch, then
-- rolled back and committed; PREPARE TRANSACTION after a batch; arrays
-- whose lower bound is not 1.  After every commit a limited topic's
-- in_flight equals its live leases counted from the rows, within its
-- limit (doc/design.md, Exactness rules: 5).
--

-- the books of the limited topics of this file
CREATE FUNCTION books() RETURNS TABLE (topic text, max_in_flight int, in_flight int, live bigint)
LANGUAGE sql AS $$
	SELECT t.topic, t.max_in_flight, t.in_flight,
		   (SELECT count(*) FROM aion_wake.outbox o
			 WHERE o.topic = t.topic AND o.leased_until > clock_timestamp())
	  FROM aion_wake.topics t
	 WHERE t.topic IN ('kl1', 'kl2') ORDER BY t.topic
$$;
-- the keys and tokens of the rows leased now of topics ts, in key order
CREATE FUNCTION leased(ts text[], OUT keys text[], OUT tokens bigint[]) LANGUAGE sql AS $$
	SELECT array_agg(dispatch_key ORDER BY dispatch_key),
		   array_agg(lease_token ORDER BY dispatch_key)
	  FROM aion_wake.outbox WHERE topic = ANY (ts) AND leased_until > clock_timestamp()
$$;

SELECT aion_wake.set_limit('kl1', 2);
SELECT aion_wake.set_limit('kl2', 3);
SELECT count(aion_wake.enqueue(t || '_' || lpad(g::text, 2, '0'), '{}', t))
  FROM unnest(ARRAY['kl1', 'kl2', 'ku']) t, generate_series(1, 12) g;
SELECT topic, count(*) FROM aion_wake.claim(ARRAY['kl1', 'kl2', 'ku'], 7, '1 hour')
 GROUP BY topic ORDER BY topic;
SELECT * FROM books();

-- keys of three topics, next_rows above the rows settled: each limited
-- topic takes as many rows as it settled, the unlimited one the rest
SELECT keys AS k, tokens AS t FROM leased(ARRAY['kl1', 'kl2', 'ku']) \gset
SELECT topic, count(*) FROM aion_wake.complete_many(:'k', :'t', next_rows => 20, lease => '1 hour')
 GROUP BY topic ORDER BY topic;
SELECT * FROM books();
-- next_rows below the rows settled: the slots no new lease took are
-- released at commit
SELECT keys AS k, tokens AS t FROM leased(ARRAY['kl1', 'kl2', 'ku']) \gset
SELECT count(*) AS took FROM aion_wake.complete_many(:'k', :'t', next_rows => 2, lease => '1 hour');
SELECT * FROM books();
SELECT topic, count(*) FROM aion_wake.claim(ARRAY['kl1', 'kl2'], 9, '1 hour')
 GROUP BY topic ORDER BY topic;
SELECT * FROM books();

-- a hand-off rolled back to a savepoint: the settled leases keep their
-- slots, the new rows are claimable again
SELECT keys AS k, tokens AS t FROM leased(ARRAY['kl1', 'kl2']) \gset
BEGIN;
SAVEPOINT s;
SELECT count(*) AS took FROM aion_wake.fail_many(:'k', 'e', '1 hour', :'t', next_rows => 5, lease => '1 hour');
ROLLBACK TO SAVEPOINT s;
SELECT * FROM books();
COMMIT;
SELECT * FROM books();
SELECT count(*) AS tokens_intact FROM aion_wake.outbox
 WHERE lease_token = ANY (:'t') AND leased_until > clock_timestamp();

-- two batches in one transaction: disjoint keys, then all of them again
-- (the rows the first one failed carry their tokens still): a lease
-- settled twice releases its slot once, and a lease the transaction took
-- passes its slot on to nobody when it settles it again
BEGIN;
SELECT count(*) AS first FROM aion_wake.fail_many((:'k'::text[])[1:2], 'e', '1 hour',
												  (:'t'::bigint[])[1:2], next_rows => 2,
												  lease => '1 hour');
SELECT count(*) AS second FROM aion_wake.fail_many((:'k'::text[])[3:], 'e', '1 hour',
												   (:'t'::bigint[])[3:], next_rows => 2,
												   lease => '1 hour');
SELECT keys AS k2, tokens AS t2 FROM leased(ARRAY['kl1', 'kl2']) \gset
SELECT count(*) AS again FROM aion_wake.complete_many(:'k'::text[] || :'k2'::text[],
													  :'t'::bigint[] || :'t2'::bigint[],
													  next_rows => 5, lease => '1 hour');
COMMIT;
SELECT * FROM books();
SELECT topic, count(*) FROM aion_wake.claim(ARRAY['kl1', 'kl2'], 9, '1 hour')
 GROUP BY topic ORDER BY topic;
SELECT * FROM books();

-- a limit lowered in the batch's own transaction binds from its commit:
-- the hand-off reserved under the old limit, and the leases above the new
-- one drain (doc/design.md, Exactness rules: 2)
SELECT count(aion_wake.enqueue('kl2_x' || g, '{}', 'kl2')) FROM generate_series(1, 8) g;
SELECT count(*) AS claimed FROM aion_wake.claim('kl2', 3, '1 hour');
SELECT keys AS k, tokens AS t FROM leased(ARRAY['kl2']) \gset
BEGIN;
SELECT aion_wake.set_limit('kl2', 1);
SELECT count(*) AS took FROM aion_wake.complete_many(:'k', :'t', next_rows => 3, lease => '1 hour');
COMMIT;
SELECT * FROM books();
SELECT count(*) AS none_over FROM aion_wake.claim('kl2', 3, '1 hour');
SELECT keys AS k, tokens AS t FROM leased(ARRAY['kl2']) \gset
-- over the new limit: the settled slots are released, not passed on
SELECT count(*) AS none_handed FROM aion_wake.complete_many(:'k', :'t', next_rows => 3);
SELECT * FROM books();
SELECT aion_wake.set_limit('kl2', 3);

-- parked rows settled by a batch: their entries stay until the commit and
-- come back on rollback; a park_many rolled back restores the entries the
-- rows had before
SELECT count(aion_wake.enqueue('kp' || g, '{}', 'kp')) FROM generate_series(1, 4) g;
SELECT keys AS k, tokens AS t FROM (SELECT array_agg(dispatch_key ORDER BY dispatch_key) AS keys,
										   array_agg(lease_token ORDER BY dispatch_key) AS tokens
									  FROM aion_wake.claim('kp', 4, '1 hour')) c \gset
SELECT aion_wake.park_many((:'k'::text[])[1:3], '1 hour', (:'t'::bigint[])[1:3]) AS parked;
SELECT dispatch_key, state FROM aion_wake.parked WHERE topic = 'kp' ORDER BY 1;
BEGIN;
SELECT aion_wake.complete_many((:'k'::text[])[1:2], (:'t'::bigint[])[1:2]) AS completed;
ROLLBACK;
SELECT dispatch_key, state FROM aion_wake.parked WHERE topic = 'kp' ORDER BY 1;
BEGIN;
SELECT aion_wake.park_many((:'k'::text[])[3:4], '2 hours', (:'t'::bigint[])[3:4]) AS reparked;
SELECT dispatch_key, state FROM aion_wake.parked WHERE topic = 'kp' ORDER BY 1;
ROLLBACK;
SELECT dispatch_key, state, fence < clock_timestamp() + interval '61 min' AS first_fence
  FROM aion_wake.parked WHERE topic = 'kp' ORDER BY 1;
SELECT dispatch_key, parked_at IS NOT NULL AS parked FROM aion_wake.outbox
 WHERE topic = 'kp' ORDER BY 1;
SELECT aion_wake.complete_many((:'k'::text[])[1:2], (:'t'::bigint[])[1:2]) AS completed;
SELECT dispatch_key, state FROM aion_wake.parked WHERE topic = 'kp' ORDER BY 1;

-- PREPARE TRANSACTION: a batch of an unlimited topic without next_rows
-- can be prepared; one of a limited topic, or a park_many, cannot
BEGIN;
SELECT aion_wake.complete_many(ARRAY[(:'k'::text[])[4]], ARRAY[(:'t'::bigint[])[4]]) AS completed;
PREPARE TRANSACTION 'batch_books';
COMMIT PREPARED 'batch_books';
SELECT keys AS k, tokens AS t FROM leased(ARRAY['kl1', 'kl2']) \gset
BEGIN;
SELECT aion_wake.complete_many(:'k', :'t') AS completed;
PREPARE TRANSACTION 'batch_books';
SELECT * FROM books();
BEGIN;
SELECT aion_wake.park_many(ARRAY['kp3'], '1 hour', ARRAY[(SELECT lease_token FROM aion_wake.outbox WHERE dispatch_key = 'kp3')]) AS parked;
PREPARE TRANSACTION 'batch_books';
SELECT count(*) AS prepared FROM pg_prepared_xacts;

-- arrays whose lower bound is not 1 pair their elements by position
SELECT keys AS k, tokens AS t FROM leased(ARRAY['kl1']) \gset
SELECT aion_wake.complete_many(('[0:1]={' || array_to_string(:'k'::text[], ',') || '}')::text[],
							   ('[7:8]={' || array_to_string(:'t'::bigint[], ',') || '}')::bigint[])
	AS completed;
SELECT * FROM books();

DO $$ BEGIN
	PERFORM aion_wake.set_limit(t, NULL) FROM unnest(ARRAY['kl1', 'kl2']) t;
END $$;
