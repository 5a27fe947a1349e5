--
-- monitoring: aion_wake.backlog() -- each topic's rows claimable now and
-- the age of the oldest -- its bound, its bad input and its privileges.
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

-- not for PUBLIC; a monitoring role needs EXECUTE and SELECT on the two
-- columns it reads, and reads no payload
CREATE ROLE mon_reader;
SET ROLE mon_reader;
SELECT err($$SELECT * FROM aion_wake.backlog()$$);
RESET ROLE;
GRANT EXECUTE ON FUNCTION aion_wake.backlog(int) TO mon_reader;
GRANT SELECT (topic, visible_after) ON aion_wake.outbox TO mon_reader;
SET ROLE mon_reader;
SELECT topic, claimable FROM aion_wake.backlog() WHERE topic LIKE 'mon%' ORDER BY topic;
SELECT err($$SELECT payload FROM aion_wake.outbox$$);
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
DROP ROLE mon_reader;
