--
-- batch: complete_many, fail_many, park_many and dead_letter_many, over
-- arrays of keys and lease tokens (1.2), with and without next_rows: what
-- each settles, that a single-row call of complete, fail, park and
-- dead_letter still resolves as before, every error path with its
-- SQLSTATE, and
-- on limited topics that no slot is released twice or exceeded.  Two
-- sessions settling overlapping keys at once: the isolation spec batch.
--

-- run q; return 'no error', or its SQLSTATE, message and detail
CREATE FUNCTION errd(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	d text;
BEGIN
	EXECUTE q;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
	RETURN SQLSTATE || ': ' || SQLERRM || coalesce(nullif(' (' || d || ')', ' ()'), '');
END $$;

-- the live leases of a topic, counted from the rows
CREATE FUNCTION live(t text) RETURNS bigint LANGUAGE sql AS $$
	SELECT count(*) FROM aion_wake.outbox
	 WHERE topic = t AND leased_until > clock_timestamp()
$$;

-- claim n rows of topic t for an hour: their keys and tokens, by key
CREATE FUNCTION take(t text, n int, OUT keys text[], OUT tokens bigint[])
LANGUAGE sql AS $$
	SELECT array_agg(dispatch_key ORDER BY dispatch_key),
		   array_agg(lease_token ORDER BY dispatch_key)
	  FROM aion_wake.claim(t, n, '1 hour')
$$;

-- the single-row forms still resolve with an unknown literal, a NULL
-- token and untyped prepared parameters (beside overloads of the same
-- names taking text[] and bigint[] the last two would be ambiguous)
SELECT pg_typeof(aion_wake.complete('nokey', 1)) AS complete,
       pg_typeof(aion_wake.complete('nokey', NULL)) AS complete_null,
       pg_typeof(aion_wake.fail('nokey', 'e', '0', 1)) AS fail,
       pg_typeof(aion_wake.park('nokey', '1 s', 1)) AS park,
       pg_typeof(aion_wake.dead_letter('nokey', 'r', 1)) AS dead_letter;
PREPARE one_complete AS SELECT aion_wake.complete($1, $2);
PREPARE one_complete_next AS SELECT * FROM aion_wake.complete($1, $2, next_rows => 1);
PREPARE one_fail AS SELECT aion_wake.fail($1, $2, $3, $4);
PREPARE one_park AS SELECT aion_wake.park($1, $2, $3);
PREPARE one_dead_letter AS SELECT * FROM aion_wake.dead_letter($1, $2, $3, $4);
SELECT name, parameter_types FROM pg_prepared_statements
 WHERE name LIKE 'one_%' ORDER BY name;
EXECUTE one_complete('nokey', NULL);
DEALLOCATE ALL;

-- bad input: nothing is settled
SELECT count(aion_wake.enqueue('b' || g, '{}', 'bt')) FROM generate_series(1, 6) g;
SELECT keys AS k, tokens AS t FROM take('bt', 6) \gset
SELECT errd($$SELECT aion_wake.complete_many(ARRAY['b1', 'b2'], ARRAY[1]::bigint[])$$);
SELECT errd($$SELECT aion_wake.complete_many(NULL::text[], ARRAY[1]::bigint[])$$);
SELECT errd($$SELECT aion_wake.complete_many(ARRAY['b1'], NULL::bigint[])$$);
SELECT errd($$SELECT aion_wake.complete_many(ARRAY['b1', NULL], ARRAY[1, 2]::bigint[])$$);
SELECT errd($$SELECT aion_wake.complete_many(ARRAY['b1', 'b2'], ARRAY[1, NULL]::bigint[])$$);
SELECT errd($$SELECT aion_wake.complete_many(ARRAY['b1', 'b2', 'b1'], ARRAY[1, 2, 3]::bigint[])$$);
SELECT errd($$SELECT aion_wake.complete_many(ARRAY[''], ARRAY[1]::bigint[])$$);
SELECT errd($$SELECT aion_wake.complete_many(ARRAY[['b1'], ['b2']], ARRAY[[1], [2]]::bigint[])$$);
SELECT errd($$SELECT aion_wake.complete_many(array_agg('k' || g), array_agg(g::bigint))
                FROM generate_series(1, 10001) g$$);
SELECT errd(format($$SELECT * FROM aion_wake.complete_many(%L, %L, next_rows => -1)$$, :'k', :'t'));
SELECT errd(format($$SELECT * FROM aion_wake.complete_many(%L, %L, next_rows => NULL)$$, :'k', :'t'));
SELECT errd(format($$SELECT * FROM aion_wake.complete_many(%L, %L, 1, '-1 s')$$, :'k', :'t'));
SELECT errd(format($$SELECT aion_wake.fail_many(%L, 'e', NULL, %L)$$, :'k', :'t'));
SELECT errd(format($$SELECT aion_wake.fail_many(%L, 'e', '-1 s', %L)$$, :'k', :'t'));
SELECT errd(format($$SELECT aion_wake.park_many(%L, NULL, %L)$$, :'k', :'t'));
SELECT errd(format($$SELECT * FROM aion_wake.park_many(%L, '1 s', %L, 1000001)$$, :'k', :'t'));
SELECT errd($$SELECT aion_wake.dead_letter_many(ARRAY['b1', 'b1'], 'r', ARRAY[1, 1]::bigint[])$$);
SELECT errd($$SELECT aion_wake.fail_many(ARRAY['b1'], 'e', '0', ARRAY[1, 2]::bigint[])$$);
SELECT errd($$SELECT aion_wake.park_many(ARRAY['b1'], '1 s', ARRAY[NULL]::bigint[])$$);
SELECT count(*) AS untouched FROM aion_wake.outbox
 WHERE topic = 'bt' AND leased_until > clock_timestamp() AND attempt = 0;
-- 10,000 keys are allowed
SELECT aion_wake.complete_many(array_agg('nokey' || g), array_agg(g::bigint))
  FROM generate_series(1, 10000) g;
-- empty arrays settle nothing
SELECT aion_wake.complete_many('{}'::text[], '{}'::bigint[]) AS complete,
       aion_wake.fail_many('{}'::text[], 'e', '0', '{}') AS fail,
       aion_wake.park_many('{}'::text[], '1 s', '{}') AS park,
       aion_wake.dead_letter_many('{}'::text[], 'r', '{}') AS dead_letter;
SELECT count(*) FROM aion_wake.complete_many('{}'::text[], '{}'::bigint[], next_rows => 5);

-- complete: a mix of valid and stale tokens and unknown keys settles only
-- the valid pairs
SELECT aion_wake.complete_many(ARRAY['b2', 'b1', 'nokey', 'b3'],
                          ARRAY[(:'t'::bigint[])[2], (:'t'::bigint[])[1], 1, -1]) AS settled;
SELECT string_agg(dispatch_key, ',' ORDER BY dispatch_key) AS left FROM aion_wake.outbox
 WHERE topic = 'bt';
-- settled once: again, nothing
SELECT aion_wake.complete_many(ARRAY['b1', 'b2'], ARRAY[(:'t'::bigint[])[1], (:'t'::bigint[])[2]]);

-- fail: attempt + 1, the error, the fence, no lease
SELECT aion_wake.fail_many(ARRAY['b3', 'b4'], 'HTTP 503', '1 hour',
                      ARRAY[(:'t'::bigint[])[3], -1]) AS failed;
SELECT dispatch_key, attempt, last_error, leased_until IS NULL AS unleased,
       visible_after > clock_timestamp() + interval '59 min' AS fenced
  FROM aion_wake.outbox WHERE dispatch_key IN ('b3', 'b4') ORDER BY 1;

-- park: parked, and confirmed in the set at commit
SELECT aion_wake.park_many(ARRAY['b5', 'b4'], '1 hour', ARRAY[(:'t'::bigint[])[5], (:'t'::bigint[])[4]]) AS parked;
SELECT dispatch_key, parked_at IS NOT NULL AS parked, leased_until IS NULL AS unleased
  FROM aion_wake.outbox WHERE dispatch_key IN ('b4', 'b5') ORDER BY 1;
SELECT dispatch_key, state FROM aion_wake.parked WHERE topic = 'bt' ORDER BY 1;

-- dead_letter: moved, with the reason; a parked row (b4) keeps its token,
-- and its park is forgotten
SELECT aion_wake.dead_letter_many(ARRAY['b6', 'b5'], 'poison',
                             ARRAY[(:'t'::bigint[])[6], (:'t'::bigint[])[5]]) AS dead;
SELECT aion_wake.dead_letter_many(ARRAY['b4'], 'poison', ARRAY[(:'t'::bigint[])[4]]) AS parked_b4;
SELECT dispatch_key, reason, leased_until IS NULL AS unleased FROM aion_wake.dead_letters
 WHERE topic = 'bt' ORDER BY 1;
SELECT count(*) AS parked_left FROM aion_wake.parked WHERE topic = 'bt';

-- a rolled-back batch settles nothing
SELECT count(aion_wake.enqueue('r' || g, '{}', 'rt')) FROM generate_series(1, 3) g;
SELECT keys AS k, tokens AS t FROM take('rt', 3) \gset
BEGIN;
SELECT aion_wake.complete_many(:'k', :'t');
ROLLBACK;
SELECT count(*) AS still_leased FROM aion_wake.outbox
 WHERE topic = 'rt' AND lease_token = ANY (:'t');
SELECT aion_wake.complete_many(:'k', :'t') AS then_settled;

-- next_rows: the next rows of the settled rows' topics, next_rows in all,
-- oldest fence first across them
SELECT count(aion_wake.enqueue('n' || g, '{}', CASE WHEN g % 2 = 0 THEN 'na' ELSE 'nb' END,
                               (g || ' ms')::interval))
  FROM generate_series(1, 10) g;
SELECT pg_sleep(0.02);
SELECT array_agg(dispatch_key ORDER BY dispatch_key) AS k,
       array_agg(lease_token ORDER BY dispatch_key) AS t
  FROM aion_wake.claim(ARRAY['na', 'nb'], 2, '1 hour') \gset
SELECT :'k' AS first_two;
SELECT dispatch_key, topic, leased_until > clock_timestamp() + interval '59 s' AS leased
  FROM aion_wake.complete_many(:'k', :'t', next_rows => 3, lease => '1 min');
-- a stale batch takes nothing
SELECT count(*) AS none FROM aion_wake.complete_many(:'k', :'t', next_rows => 3);
SELECT array_agg(dispatch_key ORDER BY dispatch_key) AS k,
       array_agg(lease_token ORDER BY dispatch_key) AS t
  FROM aion_wake.outbox WHERE topic IN ('na', 'nb') AND lease_token IS NOT NULL \gset
-- fail and dead_letter with next_rows; park with next_rows takes no parked row
SELECT dispatch_key FROM aion_wake.fail_many(:'k', 'e', '1 hour', :'t', next_rows => 2);
SELECT array_agg(dispatch_key ORDER BY dispatch_key) AS k,
       array_agg(lease_token ORDER BY dispatch_key) AS t
  FROM aion_wake.outbox WHERE topic IN ('na', 'nb') AND leased_until IS NOT NULL \gset
SELECT dispatch_key FROM aion_wake.dead_letter_many(:'k', 'r', :'t', next_rows => 1);
SELECT array_agg(dispatch_key ORDER BY dispatch_key) AS k,
       array_agg(lease_token ORDER BY dispatch_key) AS t
  FROM aion_wake.outbox WHERE topic IN ('na', 'nb') AND leased_until IS NOT NULL \gset
SELECT dispatch_key FROM aion_wake.park_many(:'k', '1 hour', :'t', next_rows => 5);
SELECT count(*) AS parked FROM aion_wake.outbox WHERE topic IN ('na', 'nb') AND parked_at IS NOT NULL;

-- an unlimited topic: each settled row's slot goes first to the oldest
-- confirmed park, leased straight from its fence; a slot no row took is a
-- pulse of one slot at commit, which the worker spends on the next parks
SELECT count(aion_wake.enqueue('p' || g, '{}', 'pu')) FROM generate_series(1, 8) g;
SELECT keys AS k, tokens AS t FROM take('pu', 8) \gset
SELECT aion_wake.park_many((:'k'::text[])[4:8], '1 hour', (:'t'::bigint[])[4:8]) AS parked;
SELECT dispatch_key, parked_at IS NULL AS unparked, leased_until > clock_timestamp() AS leased
  FROM aion_wake.complete_many((:'k'::text[])[1:3], (:'t'::bigint[])[1:3], next_rows => 1);
CALL wait_reoffered('p6');
SELECT dispatch_key, parked_at IS NOT NULL AS parked, visible_after <= clock_timestamp() AS claimable
  FROM aion_wake.outbox WHERE topic = 'pu' AND dispatch_key <> 'p4' ORDER BY 1;

-- limits: a batch complete with next_rows passes each settled lease's slot
-- to a new lease, never over the limit
SELECT aion_wake.set_limit('bl', 3);
SELECT count(aion_wake.enqueue('l' || g, '{}', 'bl')) FROM generate_series(1, 12) g;
SELECT keys AS k, tokens AS t FROM take('bl', 5) \gset
SELECT :'k' AS within_limit;
BEGIN;
SELECT dispatch_key FROM aion_wake.complete_many(:'k', :'t', next_rows => 5, lease => '1 hour');
SELECT in_flight, live('bl') AS live FROM aion_wake.topics WHERE topic = 'bl';
COMMIT;
SELECT in_flight, live('bl') AS live, (SELECT count(*) FROM aion_wake.claim('bl', 5)) AS more
  FROM aion_wake.topics WHERE topic = 'bl';

-- a rollback of a batch restores every lease, and its slots stay taken
SELECT array_agg(dispatch_key ORDER BY dispatch_key) AS k,
       array_agg(lease_token ORDER BY dispatch_key) AS t
  FROM aion_wake.outbox WHERE topic = 'bl' AND leased_until > clock_timestamp() \gset
BEGIN;
SELECT count(*) AS taken FROM aion_wake.complete_many(:'k', :'t', next_rows => 3, lease => '1 hour');
SAVEPOINT s;
SELECT aion_wake.fail_many(:'k', 'again', '0', :'t') AS repeat_settles_nothing;
ROLLBACK TO SAVEPOINT s;
ROLLBACK;
SELECT in_flight, live('bl') AS live, (SELECT count(*) FROM aion_wake.claim('bl', 5)) AS more
  FROM aion_wake.topics WHERE topic = 'bl';
SELECT count(*) AS tokens_intact FROM aion_wake.outbox
 WHERE topic = 'bl' AND lease_token = ANY (:'t') AND leased_until > clock_timestamp();

-- stale tokens on a limited topic release nothing; a lease settled twice
-- in one transaction (park_many, then complete_many) releases its slot once
SELECT aion_wake.complete_many(:'k', ARRAY[-1, -2, -3]::bigint[]) AS stale;
SELECT in_flight FROM aion_wake.topics WHERE topic = 'bl';
BEGIN;
SELECT aion_wake.park_many(:'k', '1 hour', :'t') AS parked;
SELECT count(*) AS handed FROM aion_wake.complete_many(ARRAY[(:'k'::text[])[1]], ARRAY[(:'t'::bigint[])[1]], next_rows => 2);
COMMIT;
SELECT in_flight, live('bl') AS live FROM aion_wake.topics WHERE topic = 'bl';
SELECT count(*) AS more FROM aion_wake.claim('bl', 5);
SELECT in_flight, live('bl') AS live FROM aion_wake.topics WHERE topic = 'bl';

-- several limited topics in one batch: each within its limit
SELECT aion_wake.set_limit('bl2', 2);
SELECT count(aion_wake.enqueue('m' || g, '{}', 'bl2')) FROM generate_series(1, 6) g;
SELECT array_agg(dispatch_key ORDER BY dispatch_key) AS k,
       array_agg(lease_token ORDER BY dispatch_key) AS t
  FROM (SELECT * FROM aion_wake.claim('bl2', 2, '1 hour')
        UNION ALL
        SELECT * FROM aion_wake.outbox WHERE topic = 'bl' AND leased_until > clock_timestamp()) x \gset
SELECT topic, count(*) FROM aion_wake.complete_many(:'k', :'t', next_rows => 10, lease => '1 hour')
 GROUP BY topic ORDER BY topic;
SELECT topic, max_in_flight, in_flight, live(topic) AS live FROM aion_wake.topics
 WHERE topic IN ('bl', 'bl2') ORDER BY topic;

-- a batch passes on the slots of all the leases it settled, not only the
-- 64 a single claim inherits
SELECT aion_wake.set_limit('big', 100);
SELECT count(aion_wake.enqueue('g' || lpad(g::text, 3, '0'), '{}', 'big')) FROM generate_series(1, 250) g;
SELECT keys AS k, tokens AS t FROM take('big', 100) \gset
SELECT count(*) AS took FROM aion_wake.complete_many(:'k', :'t', next_rows => 150, lease => '1 hour');
SELECT in_flight, live('big') AS live FROM aion_wake.topics WHERE topic = 'big';

DO $$ BEGIN
	PERFORM aion_wake.set_limit(t, NULL) FROM unnest(ARRAY['bl', 'bl2', 'big']) t;
END $$;
