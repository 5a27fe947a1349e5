-- test/stress/dispatch.sql: a dispatcher, wired as README's "Wiring a
-- dispatcher" says.  claim(1-3 rows) in a transaction of its own (40%
-- blocking up to 1.5 s, 5% rolled back); "offer" the first row (a short
-- think time, 8% long enough for the lease to run out, so that stale lease
-- tokens meet rows claimed again by someone else); then, in a transaction
-- of its own, one outcome:
--   1-35   complete, often with a pulse() or a raw NOTIFY
--   36-62  park, back-off 0-3 s or 1 hour; sometimes a park rolled back to
--          a savepoint first, sometimes parked twice, sometimes a slow
--          commit (pulses of other sessions then meet the pending park)
--   63-78  fail, back-off 0-3 s, none, or 1 hour (dead_letter from the
--          third attempt on)
--   79-85  dead_letter
--   86-100 nothing: the lease expires
-- 6% of the outcome transactions roll back; the other rows claimed are
-- abandoned.  Every call that returns true is logged in its transaction;
-- after park() the backend's pending entries in the parked set are logged
-- as in_set.
\set t random(0, 2)
\set m random(1, 3)
\set lease_ms random(300, 4000)
\set w random(1, 100)
\set wait_ms random(50, 1500)
\if :w > 40
\set wait_ms 0
\endif
\set cr random(1, 100)
\if :cr <= 5
BEGIN;
\endif
WITH c AS (SELECT * FROM aion_wake.claim('t' || :t, :m, make_interval(secs => :lease_ms / 1000.0),
                                         make_interval(secs => :wait_ms / 1000.0)))
SELECT (SELECT count(*) FROM c) AS n,
       coalesce(f.dispatch_key, '0')::bigint AS kid,
       coalesce(f.lease_token, 0) AS tok,
       coalesce(f.attempt, 0) AS att
  FROM (SELECT 1) one LEFT JOIN (SELECT * FROM c ORDER BY dispatch_key LIMIT 1) f ON true \gset
\if :cr <= 5
ROLLBACK;
\set n 0
\endif
\if :n > 0
\set s random(1, 100)
\set offer_ms random(0, 100)
\if :s <= 8
\set offer_ms random(300, 2500)
\endif
\sleep :offer_ms ms
\set o random(1, 100)
\set rb random(1, 100)
\if :o <= 62 and :o > 35
\set lb random(1, 100)
\set bo_ms random(0, 3000)
\if :lb <= 55
\set bo_ms 3600000
\endif
\set sp random(1, 100)
BEGIN;
\if :sp <= 10
SAVEPOINT a;
SELECT aion_wake.park(:kid::text, '1 hour', :tok);
ROLLBACK TO SAVEPOINT a;
\endif
INSERT INTO stress_log (dispatch_key, op, lease_token)
SELECT :kid::text, 'park', :tok
 WHERE aion_wake.park(:kid::text, make_interval(secs => :bo_ms / 1000.0), :tok);
\if :sp > 92
INSERT INTO stress_log (dispatch_key, op, lease_token)
SELECT :kid::text, 'park', :tok
 WHERE aion_wake.park(:kid::text, make_interval(secs => (:bo_ms + 1) / 1000.0), :tok);
\endif
INSERT INTO stress_log (dispatch_key, op, fence)
SELECT dispatch_key, 'in_set', fence FROM aion_wake.parked
 WHERE owner_pid = pg_backend_pid() AND state = 'pending';
\if :sp > 80
-- a slow commit: pulses of other sessions meet the park while it is pending
\set linger_ms random(20, 300)
\sleep :linger_ms ms
\endif
\if :rb <= 6
ROLLBACK;
\else
COMMIT;
\endif
\elif :o <= 35
BEGIN;
INSERT INTO stress_log (dispatch_key, op, lease_token)
SELECT :kid::text, 'complete', :tok WHERE aion_wake.complete(:kid::text, :tok);
\set p random(1, 100)
\if :p <= 45
SELECT aion_wake.pulse('t' || :t, 1);
\elif :p <= 65
SELECT pg_notify('aion_wake_capacity', 't' || :t || ':1');
\endif
\if :rb <= 6
ROLLBACK;
\else
COMMIT;
\endif
\elif :o <= 78 and :att < 3
\set fb_ms random(0, 3000)
\if :rb >= 90
\set fb_ms 3600000
\elif :rb >= 70
-- retry at once: the row is claimable again the moment the fail commits
\set fb_ms 0
\endif
BEGIN;
INSERT INTO stress_log (dispatch_key, op, lease_token)
SELECT :kid::text, 'fail', :tok
 WHERE aion_wake.fail(:kid::text, 'error at ' || clock_timestamp(), make_interval(secs => :fb_ms / 1000.0), :tok);
\if :rb <= 6
ROLLBACK;
\else
COMMIT;
\endif
\elif :o <= 85
BEGIN;
INSERT INTO stress_log (dispatch_key, op, lease_token)
SELECT :kid::text, 'dead_letter', :tok WHERE aion_wake.dead_letter(:kid::text, 'gave up', :tok);
\if :rb <= 6
ROLLBACK;
\else
COMMIT;
\endif
\endif
\set skid :kid
\set stok :tok
\endif
