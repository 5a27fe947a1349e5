--
-- rates_attacks: schedules that tried to break G10 (never over the rate)
-- and the pause without timing, restarts or several sessions; they held,
-- and stay as checks.  test/t/045_rates_attacks.pl has those that need
-- them.  Every rate has a window of an hour: no start leaves it while the
-- file runs.
--

-- two set_rate calls of a topic in one transaction: the last applies, as
-- it would alone; one rolled back to a savepoint gives the one before its
-- say again
BEGIN;
SELECT aion_wake.set_rate('a2', 3, '1 hour');
SELECT aion_wake.set_rate('a2', NULL);
COMMIT;
SELECT count(*) AS no_rate_row FROM aion_wake.rates WHERE topic = 'a2';
SELECT max_starts FROM aion_wake.topics WHERE topic = 'a2';
BEGIN;
SELECT aion_wake.set_rate('a2', 3, '1 hour');
SAVEPOINT s;
SELECT aion_wake.set_rate('a2', NULL);
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT max_starts FROM aion_wake.topics WHERE topic = 'a2';
BEGIN;
SELECT aion_wake.set_rate('a2', NULL);
SAVEPOINT s;
SELECT aion_wake.set_rate('a2', 5, '1 hour');
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT max_starts FROM aion_wake.topics WHERE topic = 'a2';
SELECT count(*) AS no_rate_row FROM aion_wake.rates WHERE topic = 'a2';
-- a pause and a resume in one transaction: the last applies
BEGIN;
SELECT aion_wake.pause('a2', clock_timestamp() + '1 hour');
SELECT aion_wake.resume('a2');
COMMIT;
SELECT paused_until FROM aion_wake.topics WHERE topic = 'a2';
BEGIN;
SELECT aion_wake.resume('a2');
SELECT aion_wake.pause('a2', clock_timestamp() + '1 hour');
SAVEPOINT s;
SELECT aion_wake.resume('a2');
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT paused_until > clock_timestamp() AS paused FROM aion_wake.topics WHERE topic = 'a2';
SELECT aion_wake.enqueue('a2k', '{}', 'a2');
SELECT count(*) AS none_while_paused FROM aion_wake.claim('a2', 5);
-- a pause for ever, then a pause in the past: the latter resumes
SELECT aion_wake.pause('a2', 'infinity');
SELECT paused_until, next_start_at FROM aion_wake.topics WHERE topic = 'a2';
SELECT count(*) AS none_while_paused FROM aion_wake.claim('a2', 5);
SELECT aion_wake.pause('a2', '-infinity');
SELECT count(*) AS resumed FROM aion_wake.pauses WHERE topic = 'a2';
SELECT dispatch_key FROM aion_wake.claim('a2', 5);

-- a window given with negative years: set_rate counts a year as 360 days,
-- as the table's CHECK does; the per is what the topic shows
SELECT aion_wake.set_rate('neg', 1, '-1 year 360 days 1 hour');
SELECT per FROM aion_wake.topics WHERE topic = 'neg';
SELECT err($$SELECT aion_wake.set_rate('neg', 1, '-1 year 360 days')$$);
SELECT aion_wake.set_rate('neg', NULL);

-- a hand-off's claiming round (the settle's own slot spent on a parked
-- row) is a start, as is every row it claims after
SELECT aion_wake.set_rate('hr', 3, '1 hour');
SELECT count(aion_wake.enqueue('hr' || g, '{}', 'hr')) FROM generate_series(1, 5) g;
SELECT dispatch_key FROM aion_wake.claim('hr', 1);
SELECT aion_wake.park('hr1', '1 hour');
SELECT dispatch_key FROM aion_wake.claim('hr', 1);
SELECT count(*) AS handed_off FROM aion_wake.complete('hr2',
  (SELECT lease_token FROM aion_wake.outbox WHERE dispatch_key = 'hr2'), next_rows => 5);
SELECT window_starts FROM aion_wake.topics WHERE topic = 'hr';
SELECT count(*) AS window_full FROM aion_wake.claim('hr', 5);

-- complete_many with next_rows on a rated and limited topic: the rate
-- binds the batch's hand-off too
SELECT aion_wake.set_rate('hb', 3, '1 hour'), aion_wake.set_limit('hb', 5);
SELECT count(aion_wake.enqueue('hb' || g, '{}', 'hb')) FROM generate_series(1, 6) g;
SELECT dispatch_key FROM aion_wake.claim('hb', 2);
SELECT count(*) AS handed_off FROM aion_wake.complete_many(ARRAY['hb1', 'hb2'],
  ARRAY(SELECT lease_token FROM aion_wake.outbox WHERE dispatch_key IN ('hb1', 'hb2')
         ORDER BY dispatch_key), next_rows => 5);
SELECT window_starts, in_flight FROM aion_wake.topics WHERE topic = 'hb';
-- ... and a pause binds a hand-off of a topic with leases in flight
SELECT aion_wake.pause('hb', clock_timestamp() + '1 hour'), aion_wake.set_rate('hb', NULL);
SELECT count(c.*) AS none_while_paused
  FROM aion_wake.outbox o, LATERAL aion_wake.complete(o.dispatch_key, o.lease_token, 5) c
 WHERE o.topic = 'hb' AND o.leased_until > clock_timestamp();
SELECT in_flight FROM aion_wake.topics WHERE topic = 'hb';

-- claim(topics[]) over a rated topic whose window is full and an unrated
-- one: only the unrated one's rows
SELECT count(aion_wake.enqueue('un' || g, '{}', 'un')) FROM generate_series(1, 2) g;
SELECT topic, count(*) FROM aion_wake.claim(ARRAY['hr', 'un'], 10) GROUP BY 1;

-- a claim under REPEATABLE READ is held to the window as any other
SELECT aion_wake.set_rate('rr', 1, '1 hour');
SELECT count(aion_wake.enqueue('rr' || g, '{}', 'rr')) FROM generate_series(1, 3) g;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM aion_wake.outbox WHERE topic = 'rr';
SELECT count(*) AS one FROM aion_wake.claim('rr', 3);
SELECT count(*) AS none FROM aion_wake.claim('rr', 3);
COMMIT;

-- PREPARE TRANSACTION after a claim of a rated, unlimited topic: allowed
-- (the starts are logged at the claim); its rollback gives the rows back
-- and the starts still count
SELECT aion_wake.set_rate('tp', 1, '1 hour');
SELECT count(aion_wake.enqueue('tp' || g, '{}', 'tp')) FROM generate_series(1, 2) g;
BEGIN;
SELECT dispatch_key FROM aion_wake.claim('tp', 2);
PREPARE TRANSACTION 'aw_rated_claim';
ROLLBACK PREPARED 'aw_rated_claim';
SELECT count(*) AS rolled_back_counts FROM aion_wake.claim('tp', 2);
-- ... and after one of a rated, limited topic: refused, as for any limit
SELECT aion_wake.set_limit('tp', 3), aion_wake.set_rate('tp', NULL);
BEGIN;
SELECT count(*) FROM aion_wake.claim('tp', 1);
PREPARE TRANSACTION 'aw_limited_claim';
SELECT count(*) AS nothing_prepared FROM pg_prepared_xacts;

-- the log of starts is a ring of 256 runs: a rate of 256 logs each start
-- on its own, a rate of 300 groups them; both admit exactly max_starts,
-- one claim at a time (each called anew: its arguments name the row)
SELECT aion_wake.set_rate('ring', 256, '1 hour'), aion_wake.set_rate('ring2', 300, '1 hour');
SELECT count(aion_wake.enqueue(t || '-' || g, '{}', t))
  FROM generate_series(1, 310) g, unnest(ARRAY['ring', 'ring2']) t;
SELECT t AS topic, count(c.*)
  FROM unnest(ARRAY['ring', 'ring2']) t, generate_series(1, 310) g,
       LATERAL aion_wake.claim(t, 1 + 0 * g) c
 GROUP BY 1 ORDER BY 1;
SELECT topic, window_starts, next_start_at > clock_timestamp() + '59 min' AS in_an_hour
  FROM aion_wake.topics WHERE topic IN ('ring', 'ring2') ORDER BY 1;
-- a lowering below what the ring holds lets it drain
SELECT aion_wake.set_rate('ring2', 10, '1 hour');
SELECT count(*) AS none_while_over FROM aion_wake.claim('ring2', 5);

-- clean up
DELETE FROM aion_wake.outbox WHERE topic IN ('a2', 'hr', 'hb', 'un', 'rr', 'tp', 'ring', 'ring2');
SELECT aion_wake.set_rate(topic, NULL) FROM aion_wake.rates
 WHERE topic IN ('hr', 'rr', 'a2', 'ring', 'ring2') ORDER BY topic;
SELECT aion_wake.set_limit(topic, NULL) FROM aion_wake.limits WHERE topic IN ('hb', 'tp');
SELECT aion_wake.resume('hb');
SELECT (SELECT count(*) FROM aion_wake.rates) AS rates, (SELECT count(*) FROM aion_wake.pauses) AS pauses;
