--
-- priorities (1.2): a row's priority, -100 to 100, 0 by default; claims
-- take the highest priority first, then the oldest fence, then the key,
-- within a topic and across the topics of claim(topics[]); the hand-offs
-- (single-row and batch) take the oldest confirmed park first, then rows
-- in the same order; fail, park, re-offers and claims keep a row's
-- priority, dead_letter copies it; bad values are refused.
--

-- run q; return 'no error', or its SQLSTATE and message
CREATE FUNCTION prio_err(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE q;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

-- put row k's fence m minutes in the past
CREATE FUNCTION prio_fence(k text, m int) RETURNS void LANGUAGE sql AS $$
	UPDATE aion_wake.outbox
	   SET visible_after = '2026-01-01 00:00+00'::timestamptz - m * interval '1 minute'
	 WHERE dispatch_key = k
$$;

-- the column comes last, in outbox and in dead_letters
SELECT attnum, attname, format_type(atttypid, atttypmod), attnotnull
  FROM pg_attribute WHERE attrelid = 'aion_wake.outbox'::regclass
   AND attname IN ('leased_until', 'priority') ORDER BY attnum;
SELECT attnum, attname FROM pg_attribute
 WHERE attrelid = 'aion_wake.dead_letters'::regclass AND attnum > 0
 ORDER BY attnum DESC LIMIT 1;

-- bad values: 22023 outside -100..100, 22004 for NULL; nothing inserted
SELECT prio_err($$SELECT aion_wake.enqueue('bad', '{}', 'pb', priority => 101)$$);
SELECT prio_err($$SELECT aion_wake.enqueue('bad', '{}', 'pb', priority => -101)$$);
SELECT prio_err($$SELECT aion_wake.enqueue('bad', '{}', 'pb', priority => 40000)$$);
SELECT prio_err($$SELECT aion_wake.enqueue('bad', '{}', 'pb', priority => NULL)$$);
SELECT prio_err($$SELECT aion_wake.enqueue('bad', '{}', 'pb', '0', 1.5)$$);
-- the table's own check, for writes that bypass enqueue
SELECT prio_err($$INSERT INTO aion_wake.outbox (dispatch_key, priority) VALUES ('bad', 200)$$);
SELECT count(*) AS none FROM aion_wake.outbox WHERE dispatch_key = 'bad';
-- the bounds themselves are fine; the default is 0; positional too
SELECT aion_wake.enqueue('b-hi', '{}', 'pb', priority => 100),
       aion_wake.enqueue('b-lo', '{}', 'pb', priority => -100),
       aion_wake.enqueue('b-def', '{}', 'pb'),
       aion_wake.enqueue('b-pos', '{}', 'pb', '0', 7);
SELECT dispatch_key, priority FROM aion_wake.outbox WHERE topic = 'pb' ORDER BY 1;
-- an enqueue of a key already there changes nothing, priority included
SELECT aion_wake.enqueue('b-def', '{}', 'pb', priority => 50);
SELECT priority FROM aion_wake.outbox WHERE dispatch_key = 'b-def';

-- ordering: highest priority first, then the oldest fence, then the key
-- (ties); a row of higher priority whose fence is ahead is not claimable
SELECT bool_and(aion_wake.enqueue(k, '{}', 'po', priority => p))
  FROM (VALUES ('o-a', 0), ('o-b', 5), ('o-c', 5), ('o-d', -3), ('o-e', 0),
               ('o-f', 5), ('o-g', 9), ('o-h', 0)) v(k, p);
SELECT prio_fence('o-a', 50), prio_fence('o-b', 10), prio_fence('o-c', 30),
       prio_fence('o-d', 90), prio_fence('o-e', 50), prio_fence('o-f', 30),
       prio_fence('o-h', 60);
UPDATE aion_wake.outbox SET visible_after = clock_timestamp() + interval '1 hour'
 WHERE dispatch_key = 'o-g';
SELECT dispatch_key, priority FROM aion_wake.claim('po', 3, '1 hour');
SELECT dispatch_key, priority FROM aion_wake.claim('po', 10, '1 hour');
-- the row of priority 9 once its fence passes
SELECT prio_fence('o-g', 1);
SELECT dispatch_key, priority FROM aion_wake.claim('po', 10, '1 hour');

-- claim(topics[]): one order across the topics, priority first
SELECT bool_and(aion_wake.enqueue(k, '{}', t, priority => p))
  FROM (VALUES ('m-a1', 'pma', 1), ('m-a2', 'pma', 0), ('m-b1', 'pmb', 3),
               ('m-b2', 'pmb', -1), ('m-c1', 'pmc', 1), ('m-c2', 'pmc', 0)) v(k, t, p);
SELECT prio_fence('m-a1', 10), prio_fence('m-a2', 90), prio_fence('m-b1', 5),
       prio_fence('m-b2', 99), prio_fence('m-c1', 20), prio_fence('m-c2', 80);
SELECT dispatch_key, topic, priority FROM aion_wake.claim(ARRAY['pma', 'pmb', 'pmc'], 3, '1 hour');
SELECT dispatch_key, topic, priority FROM aion_wake.claim(ARRAY['pma', 'pmb', 'pmc'], 10, '1 hour');

-- with a limit: the slots go to the highest priorities; across topics,
-- a limited topic gives no more than its limit and the rest come from
-- the others in the same order
SELECT aion_wake.set_limit('pl', 2);
SELECT bool_and(aion_wake.enqueue('pl-' || g, '{}', 'pl', priority => g % 3))
  FROM generate_series(1, 6) g;
SELECT dispatch_key, priority FROM aion_wake.claim('pl', 5, '1 hour') ORDER BY priority DESC, dispatch_key;
SELECT bool_and(aion_wake.enqueue('pl2-' || g, '{}', 'pl2', priority => 1)) FROM generate_series(1, 2) g;
SELECT dispatch_key, topic, priority FROM aion_wake.claim(ARRAY['pl', 'pl2'], 5, '1 hour')
 ORDER BY priority DESC, dispatch_key;
SELECT aion_wake.set_limit('pl', NULL);

-- the hand-off: the freed slot goes first to the oldest confirmed park,
-- whatever its priority, then to the highest priority rows
SELECT bool_and(aion_wake.enqueue(k, '{}', 'ph', priority => p))
  FROM (VALUES ('h-run', 0), ('h-park', -5)) v(k, p);
CREATE TEMP TABLE ph AS SELECT dispatch_key, lease_token FROM aion_wake.claim('ph', 2, '1 hour');
SELECT lease_token AS run_tok FROM ph WHERE dispatch_key = 'h-run' \gset
SELECT lease_token AS park_tok FROM ph WHERE dispatch_key = 'h-park' \gset
SELECT bool_and(aion_wake.enqueue(k, '{}', 'ph', priority => p))
  FROM (VALUES ('h-lo', 1), ('h-hi', 8), ('h-mid', 4)) v(k, p);
SELECT aion_wake.park('h-park', '1 hour', :park_tok);
SELECT dispatch_key, state FROM aion_wake.parked WHERE topic = 'ph';
SELECT dispatch_key, priority, parked_at IS NULL AS unparked
  FROM aion_wake.complete('h-run', :run_tok, next_rows => 2, lease => '1 hour');
-- after park() the freed slot never goes to a parked row: by priority
SELECT lease_token AS hi_tok FROM aion_wake.outbox WHERE dispatch_key = 'h-hi' \gset
SELECT dispatch_key, priority
  FROM aion_wake.park('h-hi', '1 hour', :hi_tok, next_rows => 1, lease => '1 hour');
SELECT dispatch_key, priority, parked_at IS NOT NULL AS parked,
       visible_after > clock_timestamp() AS fenced
  FROM aion_wake.outbox WHERE topic = 'ph' ORDER BY 1;

-- on a limited topic the slot passes from the settled lease to the next
-- row, by priority too
SELECT aion_wake.set_limit('phl', 1);
SELECT bool_and(aion_wake.enqueue(k, '{}', 'phl', priority => p))
  FROM (VALUES ('hl-1', 9), ('hl-2', 0), ('hl-3', 3)) v(k, p);
SELECT lease_token AS hl_tok FROM aion_wake.claim('phl', 5, '1 hour') \gset
SELECT dispatch_key, lease_token = :hl_tok AS same FROM aion_wake.outbox
 WHERE topic = 'phl' AND leased_until > clock_timestamp();
SELECT dispatch_key, priority
  FROM aion_wake.complete('hl-1', :hl_tok, next_rows => 5, lease => '1 hour');
SELECT topic, max_in_flight, in_flight FROM aion_wake.topics WHERE topic = 'phl';
SELECT aion_wake.set_limit('phl', NULL);

-- the batch hand-off: the same order
SELECT bool_and(aion_wake.enqueue(k, '{}', 'pbh', priority => p))
  FROM (VALUES ('bh-1', 0), ('bh-2', 0), ('bh-3', -1), ('bh-4', 6), ('bh-5', 2), ('bh-6', 6)) v(k, p);
SELECT prio_fence('bh-4', 1), prio_fence('bh-6', 2);
CREATE TEMP TABLE bh AS SELECT dispatch_key, lease_token FROM aion_wake.claim('pbh', 2, '1 hour');
SELECT dispatch_key FROM bh ORDER BY 1;
SELECT dispatch_key, priority
  FROM aion_wake.complete_many((SELECT array_agg(dispatch_key ORDER BY dispatch_key) FROM bh),
                               (SELECT array_agg(lease_token ORDER BY dispatch_key) FROM bh),
                               next_rows => 3, lease => '1 hour');

-- fail, park, a re-offer and dead_letter keep the priority
SELECT bool_and(aion_wake.enqueue(k, '{}', 'pk', priority => p))
  FROM (VALUES ('k-f', 3), ('k-p', -7), ('k-d', 42), ('k-dm', -42)) v(k, p);
SELECT aion_wake.fail('k-f', 'boom', '1 hour');
SELECT aion_wake.park('k-p', '1 hour');
SELECT aion_wake.reoffer('pk', 1);
SELECT dispatch_key, priority, attempt, parked_at IS NULL AS unparked
  FROM aion_wake.outbox WHERE topic = 'pk' ORDER BY 1;
SELECT dispatch_key, priority FROM aion_wake.claim('pk', 5, '1 hour') ORDER BY 1;
SELECT aion_wake.dead_letter('k-d', 'poison');
SELECT aion_wake.dead_letter_many(ARRAY['k-dm'], 'poison',
       ARRAY(SELECT lease_token FROM aion_wake.outbox WHERE dispatch_key = 'k-dm'));
SELECT dispatch_key, priority, reason FROM aion_wake.dead_letters
 WHERE dispatch_key IN ('k-d', 'k-dm') ORDER BY 1;
-- a key dead-lettered again takes the new priority
SELECT aion_wake.enqueue('k-d', '{}', 'pk', priority => -1);
SELECT aion_wake.dead_letter('k-d', 'again');
SELECT dispatch_key, priority, reason FROM aion_wake.dead_letters WHERE dispatch_key = 'k-d';

-- a claim of one row looks at the top priority first (src/claim.c); when
-- that priority has rows but none visible it walks on, and the next claims
-- of the topic in this session walk straight away: each still takes the
-- highest priority first, as soon as its row becomes visible
SELECT bool_and(aion_wake.enqueue(k, '{}', 'pf', delay => d, priority => p))
  FROM (VALUES ('f-top', '1 hour'::interval, 5), ('f-a', '0', 0), ('f-low', '0', -3)) v(k, d, p);
SELECT aion_wake.enqueue('f-b', '{}', 'pf');
SELECT dispatch_key, priority FROM aion_wake.claim('pf', 1, '1 hour');
UPDATE aion_wake.outbox SET visible_after = now() - interval '1 minute'
 WHERE dispatch_key = 'f-top';
SELECT dispatch_key, priority FROM aion_wake.claim('pf', 1, '1 hour');
SELECT dispatch_key, priority FROM aion_wake.claim('pf', 1, '1 hour');
SELECT dispatch_key, priority FROM aion_wake.claim('pf', 1, '1 hour');
SELECT dispatch_key, priority FROM aion_wake.claim('pf', 1, '1 hour');

DELETE FROM aion_wake.outbox
 WHERE topic IN ('pb', 'po', 'pma', 'pmb', 'pmc', 'pl', 'pl2', 'ph', 'phl', 'pbh', 'pk', 'pf');
DELETE FROM aion_wake.dead_letters WHERE topic = 'pk';
DROP FUNCTION prio_err(text);
DROP FUNCTION prio_fence(text, int);
