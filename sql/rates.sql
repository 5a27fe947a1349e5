--
-- rates: the 1.2 interface of rates and pauses -- set_rate(), pause(),
-- resume(), aion_wake.rates and aion_wake.pauses, claims and hand-offs
-- within a rate, and the views' new columns -- with every error path and
-- its SQLSTATE.  Every rate here has a window of an hour, so that no start
-- leaves it while the file runs; timing, wakes and concurrency are held by
-- test/t/044_rates.pl.
--

-- bad input: nothing is written
SELECT err($$SELECT aion_wake.set_rate(NULL, 2, '1 s')$$);
SELECT err($$SELECT aion_wake.set_rate('bad topic', 2, '1 s')$$);
SELECT err($$SELECT aion_wake.set_rate('r', 0, '1 s')$$);
SELECT err($$SELECT aion_wake.set_rate('r', 1000001, '1 s')$$);
SELECT err($$SELECT aion_wake.set_rate('r', -5, '1 s')$$);
SELECT err($$SELECT aion_wake.set_rate('r', 2)$$);
SELECT err($$SELECT aion_wake.set_rate('r', 2, NULL)$$);
SELECT err($$SELECT aion_wake.set_rate('r', 2, '0')$$);
SELECT err($$SELECT aion_wake.set_rate('r', 2, '-1 s')$$);
SELECT err($$SELECT aion_wake.set_rate('r', 2, '999 microseconds')$$);
SELECT err($$SELECT aion_wake.set_rate('r', 2, '1 day 1 microsecond')$$);
SELECT err($$SELECT aion_wake.set_rate('r', 2, '1 mon')$$);
SELECT err($$SELECT aion_wake.pause(NULL, now() + '1 h')$$);
SELECT err($$SELECT aion_wake.pause('p', NULL)$$);
SELECT err($$SELECT aion_wake.pause('bad topic', now() + '1 h')$$);
SELECT err($$SELECT aion_wake.resume(NULL)$$);
SELECT count(*) AS nothing_written FROM aion_wake.rates, aion_wake.pauses;
-- the bounds themselves are allowed
SELECT aion_wake.set_rate('r.bounds', 1000000, '1 ms'), aion_wake.set_rate('r.bounds', 1, '1 day');
SELECT aion_wake.set_rate('r.bounds', NULL);

-- set_rate applies at commit, and not after a rollback
BEGIN;
SELECT aion_wake.set_rate('r', 2, '1 hour');
SELECT max_starts FROM aion_wake.topics WHERE topic = 'r';
ROLLBACK;
SELECT count(*) FROM aion_wake.rates;
SELECT aion_wake.set_rate('r', 2, '1 hour');
SELECT topic, max_starts, per, updated_at <= clock_timestamp() AS dated FROM aion_wake.rates;
SELECT topic, max_starts, per, window_starts, next_start_at, paused_until
  FROM aion_wake.topics WHERE topic = 'r';

-- a claim takes at most the starts its window has left; every row is one
SELECT count(aion_wake.enqueue('r' || g, '{}', 'r')) FROM generate_series(1, 6) g;
SELECT claims_rate_delayed AS delayed_before FROM aion_wake.status \gset
SELECT dispatch_key FROM aion_wake.claim('r', 5) ORDER BY 1;
SELECT count(*) AS nothing_more FROM aion_wake.claim('r', 5);
SELECT claims_rate_delayed - :delayed_before AS delayed FROM aion_wake.status;
SELECT window_starts, next_start_at > clock_timestamp() + '59 min' AS next_in_an_hour
  FROM aion_wake.topics WHERE topic = 'r';
-- claim(topics[]) is held to each topic's rate too
SELECT count(*) FROM aion_wake.claim(ARRAY['r', 'default'], 5);
-- a hand-off's next row is a start: the window is full, so it takes none
SELECT aion_wake.complete('r1', (SELECT lease_token FROM aion_wake.outbox WHERE dispatch_key = 'r1'));
SELECT count(*) AS handed_off FROM aion_wake.complete('r2',
  (SELECT lease_token FROM aion_wake.outbox WHERE dispatch_key = 'r2'), next_rows => 1);

-- a raise lets as many more start at its commit; a lowering lets the
-- window drain
SELECT aion_wake.set_rate('r', 3, '1 hour');
SELECT dispatch_key FROM aion_wake.claim('r', 5);
SELECT aion_wake.set_rate('r', 1, '1 hour');
SELECT window_starts, max_starts FROM aion_wake.topics WHERE topic = 'r';
SELECT count(*) AS none_while_over FROM aion_wake.claim('r', 5);

-- two calls in one transaction: only the last applies, as it would alone,
-- and the log of starts is kept (NULL then 3 is 3, not a fresh window)
BEGIN;
SELECT aion_wake.set_rate('r', NULL);
SELECT aion_wake.set_rate('r', 3, '1 hour');
COMMIT;
SELECT max_starts, window_starts FROM aion_wake.topics WHERE topic = 'r';
SELECT count(*) AS still_full FROM aion_wake.claim('r', 5);
-- a savepoint rolled back gives the call before it its say
BEGIN;
SELECT aion_wake.set_rate('r', 4, '1 hour');
SAVEPOINT s;
SELECT aion_wake.set_rate('r', 1, '1 hour');
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT max_starts FROM aion_wake.rates WHERE topic = 'r';
SELECT dispatch_key FROM aion_wake.claim('r', 5);

-- a claim rolled back still counts: the caller held the row
SELECT aion_wake.set_rate('rb', 1, '1 hour');
SELECT aion_wake.enqueue('rb1', '{}', 'rb'), aion_wake.enqueue('rb2', '{}', 'rb');
BEGIN;
SELECT dispatch_key FROM aion_wake.claim('rb');
ROLLBACK;
SELECT count(*) AS rolled_back_counts FROM aion_wake.claim('rb', 2);
SELECT window_starts FROM aion_wake.topics WHERE topic = 'rb';

-- removing the rate: claims take what they want again
SELECT aion_wake.set_rate('r', NULL);
SELECT count(*) FROM aion_wake.rates WHERE topic = 'r';
SELECT max_starts, per, window_starts FROM aion_wake.topics WHERE topic = 'r';
SELECT count(*) AS all_the_rest FROM aion_wake.claim('r', 10);

-- pause: no claim takes a row until the moment, from the commit on (the
-- view shows the set, where it applies at commit)
SELECT aion_wake.enqueue('p1', '{}', 'p'), aion_wake.enqueue('p2', '{}', 'p');
BEGIN;
SELECT aion_wake.pause('p', clock_timestamp() + '1 hour');
SELECT count(*) AS written_now FROM aion_wake.pauses;
SELECT paused_until FROM aion_wake.topics WHERE topic = 'p';
ROLLBACK;
SELECT count(*) FROM aion_wake.pauses;
SELECT aion_wake.pause('p', clock_timestamp() + '1 hour');
SELECT topic, paused_until > clock_timestamp() AS ahead FROM aion_wake.pauses;
SELECT paused_until = next_start_at AS next_is_the_end FROM aion_wake.topics WHERE topic = 'p';
SELECT claims_paused AS paused_before FROM aion_wake.status \gset
SELECT count(*) AS paused FROM aion_wake.claim('p', 2);
SELECT claims_paused - :paused_before AS paused_claims FROM aion_wake.status;
-- resume: claims take rows again
SELECT aion_wake.resume('p');
SELECT count(*) FROM aion_wake.pauses;
SELECT paused_until FROM aion_wake.topics WHERE topic = 'p';
SELECT dispatch_key FROM aion_wake.claim('p', 1);
-- a pause whose moment has passed resumes at once
SELECT aion_wake.pause('p', clock_timestamp() - interval '1 s');
SELECT count(*) FROM aion_wake.pauses;
SELECT dispatch_key FROM aion_wake.claim('p', 1);

-- PREPARE TRANSACTION is refused after set_rate, pause and resume, as
-- after set_limit: COMMIT PREPARED could not apply them
BEGIN;
SELECT aion_wake.set_rate('r2pc', 5, '1 s');
PREPARE TRANSACTION 'aw_rate';
BEGIN;
SELECT aion_wake.pause('r2pc', clock_timestamp() + '1 s');
PREPARE TRANSACTION 'aw_pause';
SELECT count(*) AS nothing_prepared FROM pg_prepared_xacts;
SELECT count(*) AS nothing_kept FROM aion_wake.rates WHERE topic = 'r2pc';

-- a rate and a limit on one topic: both must allow
SELECT aion_wake.set_rate('rl', 3, '1 hour'), aion_wake.set_limit('rl', 2);
SELECT count(aion_wake.enqueue('rl' || g, '{}', 'rl')) FROM generate_series(1, 5) g;
SELECT count(*) AS within_the_limit FROM aion_wake.claim('rl', 5);
SELECT aion_wake.complete(dispatch_key) FROM aion_wake.outbox
 WHERE topic = 'rl' AND leased_until > clock_timestamp();
SELECT count(*) AS within_the_rate FROM aion_wake.claim('rl', 5);
SELECT in_flight, window_starts FROM aion_wake.topics WHERE topic = 'rl';
SELECT aion_wake.set_limit('rl', NULL), aion_wake.set_rate('rl', NULL);

-- clean up
DELETE FROM aion_wake.outbox WHERE topic IN ('r', 'rb', 'p', 'rl');
SELECT aion_wake.set_rate('rb', NULL);
SELECT count(*) AS no_rates_left FROM aion_wake.rates;
