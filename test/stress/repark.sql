-- test/stress/repark.sql: a dispatcher that extends the back-off of a row it
-- parked: re-park one of the 30 oldest parked rows of a topic (those the
-- worker re-offers next) with the lease token it carries, and roll back 40%
-- of the time.  A re-park replaces the row's entry in the set; a rolled-back
-- re-park must leave the committed park in the set, even when the worker
-- had taken that entry for a re-offer meanwhile.  One row per transaction,
-- locked with SKIP LOCKED, so re-parkers never wait for each other.
\set t random(0, 2)
\set rb random(1, 100)
\set bo_ms random(600000, 3600000)
\set off random(0, 29)
BEGIN;
WITH r AS MATERIALIZED (SELECT dispatch_key, lease_token FROM aion_wake.outbox
                         WHERE topic = 't' || :t AND parked_at IS NOT NULL
                           AND visible_after > clock_timestamp() + interval '10 s'
                         ORDER BY parked_at OFFSET :off LIMIT 1 FOR UPDATE SKIP LOCKED)
INSERT INTO stress_log (dispatch_key, op, lease_token)
SELECT dispatch_key, 'park', lease_token FROM r
 WHERE aion_wake.park(dispatch_key, make_interval(secs => :bo_ms / 1000.0), lease_token);
INSERT INTO stress_log (dispatch_key, op, fence)
SELECT dispatch_key, 'in_set', fence FROM aion_wake.parked
 WHERE owner_pid = pg_backend_pid() AND state = 'pending';
\if :rb <= 40
ROLLBACK;
\else
COMMIT;
\endif
