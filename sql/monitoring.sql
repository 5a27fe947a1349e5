--
-- monitoring: aion_wake.backlog() -- each topic's rows claimable now and
-- the age of the oldest -- its bound, its bad input and its privileges;
-- aion_wake.topic_health, aion_wake.claim_histogram and status.lost_wakes
-- (the lost-wake detector itself: test/t/046_lost_wake.pl).
-- The metrics that postgres_exporter scrapes from it are checked by
-- test/monitoring/run.sh against the real exporter.
--

-- rows claimable now, leased, and fenced ahead, in three topics
SELECT count(aion_wake.enqueue('mon_a' || g, '{}', 'mon_a')) FROM generate_series(1, 5) g;
SELECT count(aion_wake.enqueue('mon_b' || g, '{}', 'mon_b', '1 hour')) FROM generate_series(1, 2) g;
SELECT aion_wake.enqueue('mon_c1', '{}', 'mon_c');
SELECT count(*) FROM aion_wake.claim('mon_c', 1);
-- the age is measured from the fence: make the oldest row claimable for a
-- known time
UPDATE aion_wake.outbox SET visible_after = now() - interval '90 s' WHERE dispatch_key = 'mon_a1';
SELECT topic, claimable,
       oldest_claimable_age >= interval '90 s' AND oldest_claimable_age < interval '1 hour' AS age_from_oldest_fence,
       oldest_claimable_age IS NULL AS none_claimable
  FROM aion_wake.backlog() WHERE topic LIKE 'mon%' ORDER BY topic;

-- the count stops at count_up_to; NULL counts them all
SELECT claimable FROM aion_wake.backlog(2) WHERE topic = 'mon_a';
SELECT claimable FROM aion_wake.backlog(NULL) WHERE topic = 'mon_a';
SELECT claimable FROM aion_wake.backlog(0) WHERE topic = 'mon_a';
SELECT err($$SELECT * FROM aion_wake.backlog(-1)$$);

-- a parked row is not claimable before its fence (or a re-offer)
SELECT aion_wake.park(dispatch_key, '1 hour', lease_token) FROM aion_wake.claim('mon_a', 1);
SELECT claimable FROM aion_wake.backlog() WHERE topic = 'mon_a';
-- ... and topic_health shows it parked, confirmed (its park committed)
SELECT claimable, parked_pending, parked_confirmed FROM aion_wake.topic_health WHERE topic = 'mon_a';

-- topic_health: the table's figures beside shared memory's counters.
-- Topic mon_h: a claim that finds nothing, one that takes 2 of 3 rows,
-- one with wait that takes the last at once (it never blocks), one with
-- wait that ends at its deadline with nothing.  A topic with counters and
-- no row left still has its row.
SELECT count(*) FROM aion_wake.claim('mon_h', 1);
SELECT count(aion_wake.enqueue('mon_h' || g, '{}', 'mon_h')) FROM generate_series(1, 3) g;
SELECT count(*) FROM aion_wake.claim('mon_h', 2);
SELECT count(*) FROM aion_wake.claim('mon_h', 5, wait => '10 ms');
SELECT count(*) FROM aion_wake.claim('mon_h', 1, wait => '10 ms');
SELECT topic, claimable, oldest_claimable_age IS NULL AS none_claimable, parked_pending,
       parked_confirmed, max_in_flight, in_flight, waiters, claims, rows_claimed, wakes,
       wakes_found_row, claims_timed_out, lost_wakes
  FROM aion_wake.topic_health WHERE topic = 'mon_h';
-- a limited topic shows its limit and live leases
SELECT aion_wake.set_limit('mon_h', 5);
SELECT max_in_flight, in_flight FROM aion_wake.topic_health WHERE topic = 'mon_h';
SELECT aion_wake.set_limit('mon_h', NULL);
-- a topic with rows and no counter yet: zeros, not nulls
SELECT count(aion_wake.enqueue('mon_i' || g, '{}', 'mon_i')) FROM generate_series(1, 2) g;
SELECT topic, claimable, claims, rows_claimed, lost_wakes
  FROM aion_wake.topic_health WHERE topic = 'mon_i';
-- the status view counts lost wakes: none here
SELECT lost_wakes FROM aion_wake.status;

-- the histograms: fixed bounds in seconds, cumulative counts, one per
-- bound, the last no more than the count (the +Inf bucket)
SELECT histogram, le, array_length(buckets, 1) = array_length(le, 1) AS one_per_bound,
       buckets[array_length(buckets, 1)] <= count AS up_to_count,
       (SELECT bool_and(b.x <= b.y)
          FROM unnest(buckets[1:13], buckets[2:14]) AS b(x, y)) AS cumulative,
       sum_seconds >= 0 AS summed
  FROM aion_wake.claim_histogram ORDER BY histogram;
-- every row claimed above was observed by claim_latency
SELECT count >= 6 AS latency_counted FROM aion_wake.claim_histogram WHERE histogram = 'claim_latency';

-- the debug hooks are for superusers only, and off
SHOW aion_wake.debug_drop_wakes;
SHOW aion_wake.debug_look_lock;
SHOW aion_wake.lost_wake_tolerance;

-- not for PUBLIC; a monitoring role needs EXECUTE and SELECT on the two
-- columns it reads, and reads no payload
CREATE ROLE mon_reader;
SET ROLE mon_reader;
SELECT err($$SELECT * FROM aion_wake.backlog()$$);
RESET ROLE;
GRANT EXECUTE ON FUNCTION aion_wake.backlog(int) TO mon_reader;
GRANT SELECT (topic, priority, visible_after) ON aion_wake.outbox TO mon_reader;
SET ROLE mon_reader;
SELECT topic, claimable FROM aion_wake.backlog() WHERE topic LIKE 'mon%' ORDER BY topic;
SELECT err($$SELECT payload FROM aion_wake.outbox$$);
SELECT err($$SELECT * FROM aion_wake.topic_health$$);
SELECT err($$SELECT * FROM aion_wake.claim_histogram$$);
SELECT err($$SET aion_wake.debug_drop_wakes = on$$);
SELECT err($$SET aion_wake.debug_look_lock = 1$$);
RESET ROLE;
-- the grants of README's Monitoring section
GRANT SELECT ON aion_wake.topic_health, aion_wake.claim_histogram TO mon_reader;
GRANT EXECUTE ON FUNCTION aion_wake.topic_health(int), aion_wake.topic_health_internal(),
  aion_wake.claim_histogram_internal() TO mon_reader;
SET ROLE mon_reader;
SELECT topic, claimable, claims FROM aion_wake.topic_health WHERE topic LIKE 'mon%' ORDER BY topic;
SELECT histogram FROM aion_wake.claim_histogram ORDER BY 1;
RESET ROLE;

-- a hostile search_path changes nothing: every name in it is qualified
CREATE SCHEMA mon_evil;
CREATE FUNCTION mon_evil.now() RETURNS timestamptz LANGUAGE sql AS $$ SELECT 'infinity'::timestamptz $$;
SET search_path = mon_evil, public;
SELECT claimable FROM aion_wake.backlog() WHERE topic = 'mon_a';
RESET search_path;

DELETE FROM aion_wake.outbox WHERE topic LIKE 'mon%';
DROP SCHEMA mon_evil CASCADE;
REVOKE ALL ON aion_wake.outbox FROM mon_reader;
REVOKE ALL ON FUNCTION aion_wake.backlog(int) FROM mon_reader;
REVOKE ALL ON aion_wake.topic_health, aion_wake.claim_histogram FROM mon_reader;
REVOKE ALL ON FUNCTION aion_wake.topic_health(int), aion_wake.topic_health_internal(),
  aion_wake.claim_histogram_internal() FROM mon_reader;
DROP ROLE mon_reader;
