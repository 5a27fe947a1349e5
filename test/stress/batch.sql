-- test/stress/batch.sql: a dispatcher whose consumer is saturated: claim
-- 5-25 rows and park them all in the same transaction (claim-then-park in
-- one transaction), mostly for 1 hour, so that the parked set (1024 rows)
-- fills now and then; 8% roll back.  Logged like dispatch.sql.
\set t random(0, 2)
\set m random(5, 25)
\set rb random(1, 100)
\set bo_ms random(0, 3000)
\if :rb > 20
\set bo_ms 3600000
\endif
BEGIN;
WITH c AS (SELECT dispatch_key, lease_token FROM aion_wake.claim('t' || :t, :m, '30 s'))
INSERT INTO stress_log (dispatch_key, op, lease_token)
SELECT c.dispatch_key, 'park', c.lease_token FROM c
 WHERE aion_wake.park(c.dispatch_key, make_interval(secs => :bo_ms / 1000.0), c.lease_token);
INSERT INTO stress_log (dispatch_key, op, fence)
SELECT dispatch_key, 'in_set', fence FROM aion_wake.parked
 WHERE owner_pid = pg_backend_pid() AND state = 'pending';
\if :rb <= 8
ROLLBACK;
\else
COMMIT;
\endif
