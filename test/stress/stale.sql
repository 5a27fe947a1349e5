-- test/stress/stale.sql: a dispatcher that acts late, with the key and lease
-- token this client claimed last (skid/stok, set by dispatch.sql).  If
-- someone claimed the row since, or it is gone, the call must return false
-- and do nothing; if the lease still matches, it acts (and is logged).
\if :skid > 0
\set o random(1, 100)
BEGIN;
\if :o <= 30
INSERT INTO stress_log (dispatch_key, op, lease_token)
SELECT :skid::text, 'complete', :stok WHERE aion_wake.complete(:skid::text, :stok);
\elif :o <= 75
INSERT INTO stress_log (dispatch_key, op, lease_token)
SELECT :skid::text, 'park', :stok WHERE aion_wake.park(:skid::text, '1 hour', :stok);
INSERT INTO stress_log (dispatch_key, op, fence)
SELECT dispatch_key, 'in_set', fence FROM aion_wake.parked
 WHERE owner_pid = pg_backend_pid() AND state = 'pending';
\else
INSERT INTO stress_log (dispatch_key, op, lease_token)
SELECT :skid::text, 'fail', :stok
 WHERE aion_wake.fail(:skid::text, 'late error at ' || clock_timestamp(), '2 s', :stok);
\endif
\if :o % 10 = 0
ROLLBACK;
\else
COMMIT;
\endif
\endif
