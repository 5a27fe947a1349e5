-- test/stress/limited.sql: a dispatcher of the limited topics l0 (at most
-- one row leased at once) and l1 (at most three; setup.sql sets both), with
-- the known-capacity wiring: no pulses, the limit says when to claim.
-- claim() 1-3 rows -- from l0, from l1, from both in one claim(topics[]),
-- or from l1, t2 and l0 in one claim -- half the time blocking up to 1.5 s
-- (a full topic blocks), 5% in a transaction rolled back; "offer" the first
-- row (a short think time, 8% long enough for the lease to run out); then,
-- in a transaction of its own, one outcome for it:
--   1-35   complete
--   36-55  park, back-off 0-3 s or 1 hour (the slot is released, no pulse)
--   56-72  fail, back-off 0 (claimable at once), 0-3 s or 1 hour
--          (dead_letter from the third attempt on)
--   73-78  dead_letter
--   79-100 nothing: its lease expires
-- The other rows claimed are abandoned: their leases expire.  6% of the
-- outcome transactions roll back.  Every call that returns true is logged
-- in its transaction, as in dispatch.sql, and the first row's key and
-- token are left to stale.sql, which may then settle it late.
\set ts random(1, 4)
\set m random(1, 3)
\set lease_ms random(300, 4000)
\set w random(1, 100)
\set wait_ms random(50, 1500)
\if :w > 50
\set wait_ms 0
\endif
\set cr random(1, 100)
\if :cr <= 5
BEGIN;
\endif
\if :ts <= 2
WITH c AS (SELECT * FROM aion_wake.claim((ARRAY['l0', 'l1'])[:ts], :m,
                                         make_interval(secs => :lease_ms / 1000.0),
                                         make_interval(secs => :wait_ms / 1000.0)))
SELECT (SELECT count(*) FROM c) AS n,
       coalesce(f.dispatch_key, '0')::bigint AS kid,
       coalesce(f.lease_token, 0) AS tok,
       coalesce(f.attempt, 0) AS att
  FROM (SELECT 1) one LEFT JOIN (SELECT * FROM c ORDER BY dispatch_key LIMIT 1) f ON true \gset
\else
WITH c AS (SELECT * FROM aion_wake.claim(CASE WHEN :ts = 3 THEN ARRAY['l0', 'l1']
                                              ELSE ARRAY['l1', 't2', 'l0'] END, :m,
                                         make_interval(secs => :lease_ms / 1000.0),
                                         make_interval(secs => :wait_ms / 1000.0)))
SELECT (SELECT count(*) FROM c) AS n,
       coalesce(f.dispatch_key, '0')::bigint AS kid,
       coalesce(f.lease_token, 0) AS tok,
       coalesce(f.attempt, 0) AS att
  FROM (SELECT 1) one LEFT JOIN (SELECT * FROM c ORDER BY dispatch_key LIMIT 1) f ON true \gset
\endif
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
\if :o <= 35
BEGIN;
INSERT INTO stress_log (dispatch_key, op, lease_token)
SELECT :kid::text, 'complete', :tok WHERE aion_wake.complete(:kid::text, :tok);
\if :rb <= 6
ROLLBACK;
\else
COMMIT;
\endif
\elif :o <= 55
\set bo_ms random(0, 3000)
\set lb random(1, 100)
\if :lb <= 50
\set bo_ms 3600000
\endif
BEGIN;
INSERT INTO stress_log (dispatch_key, op, lease_token)
SELECT :kid::text, 'park', :tok
 WHERE aion_wake.park(:kid::text, make_interval(secs => :bo_ms / 1000.0), :tok);
INSERT INTO stress_log (dispatch_key, op, fence)
SELECT dispatch_key, 'in_set', fence FROM aion_wake.parked
 WHERE owner_pid = pg_backend_pid() AND state = 'pending';
\if :rb <= 6
ROLLBACK;
\else
COMMIT;
\endif
\elif :o <= 72 and :att < 3
\set fb_ms random(0, 3000)
\if :rb >= 90
\set fb_ms 3600000
\elif :rb >= 60
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
\elif :o <= 78
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
