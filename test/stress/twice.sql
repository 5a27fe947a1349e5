-- test/stress/twice.sql (mode two): one lease of a limited topic (l0,
-- limit 1, or l1, limit 3) settled twice in one transaction, then more rows
-- of the topic taken in that transaction.  However many times a lease is
-- settled, its slot is handed on once: the G8 check of the ledger sees any
-- second hand-off as one lease too many.
-- First a claim of one row, committed on its own (a live lease), then one
-- transaction, rolled back 12% of the time:
--   1-30   fail (back-off 0 or 0-2 s), dead_letter, claim 1-3 rows
--   31-55  fail, complete with next_rows 1-3
--   56-70  fail, fail with next_rows 1-3 (the second fail also counts an
--          attempt: the token still matches)
--   71-85  park (back-off 0 or 1 hour), dead_letter with next_rows 1-3
--   86-100 complete, then complete with next_rows 1-3 (finds no row: one
--          settle, a control)
-- Every settle that acts is logged in its transaction; the forms with
-- next_rows return rows, not a boolean, so whether they acted is read from
-- the row itself, and only when the first settle acted (this transaction
-- then holds the row's lock: nobody else can change it).  The rows taken are left to expire; the first is handed to
-- stale.sql.
\set ts random(1, 2)
\set lease_ms random(400, 3000)
\set wait_ms random(0, 800)
WITH c AS (SELECT * FROM aion_wake.claim((ARRAY['l0', 'l1'])[:ts], 1,
                                         make_interval(secs => :lease_ms / 1000.0),
                                         make_interval(secs => :wait_ms / 1000.0)))
SELECT (SELECT count(*) FROM c) AS n,
       coalesce(f.dispatch_key, '0')::bigint AS kid,
       coalesce(f.lease_token, 0) AS tok,
       coalesce(f.attempt, 0) AS att
  FROM (SELECT 1) one LEFT JOIN c f ON true \gset
\if :n > 0
\set o random(1, 100)
\set rb random(1, 100)
\set m random(1, 3)
\set next_ms random(300, 3000)
\set fb_ms random(0, 2000)
\if :rb <= 50
\set fb_ms 0
\endif
BEGIN;
\if :o <= 85
\if :o <= 70
INSERT INTO stress_log (dispatch_key, op, lease_token)
SELECT :kid::text, 'fail', :tok
 WHERE aion_wake.fail(:kid::text, 'first of two settles', make_interval(secs => :fb_ms / 1000.0), :tok);
\else
INSERT INTO stress_log (dispatch_key, op, lease_token)
SELECT :kid::text, 'park', :tok
 WHERE aion_wake.park(:kid::text, CASE WHEN :rb <= 50 THEN interval '0' ELSE interval '1 hour' END, :tok);
\endif
\else
INSERT INTO stress_log (dispatch_key, op, lease_token)
SELECT :kid::text, 'complete', :tok WHERE aion_wake.complete(:kid::text, :tok);
\endif
\if :o <= 30
INSERT INTO stress_log (dispatch_key, op, lease_token)
SELECT :kid::text, 'dead_letter', :tok WHERE aion_wake.dead_letter(:kid::text, 'second settle', :tok);
WITH c AS (SELECT * FROM aion_wake.claim((ARRAY['l0', 'l1'])[:ts], :m, make_interval(secs => :next_ms / 1000.0)))
SELECT coalesce(f.dispatch_key, '0')::bigint AS nkid, coalesce(f.lease_token, 0) AS ntok
  FROM (SELECT 1) one LEFT JOIN (SELECT * FROM c ORDER BY dispatch_key LIMIT 1) f ON true \gset
\elif :o <= 55 or :o > 85
WITH c AS (SELECT * FROM aion_wake.complete(:kid::text, :tok, :m, make_interval(secs => :next_ms / 1000.0)))
SELECT coalesce(f.dispatch_key, '0')::bigint AS nkid, coalesce(f.lease_token, 0) AS ntok
  FROM (SELECT 1) one LEFT JOIN (SELECT * FROM c ORDER BY dispatch_key LIMIT 1) f ON true \gset
INSERT INTO stress_log (dispatch_key, op, lease_token)
SELECT :kid::text, 'complete', :tok
 WHERE EXISTS (SELECT 1 FROM stress_log WHERE xid = pg_current_xact_id() AND op = 'fail'
                  AND dispatch_key = :kid::text)
   AND NOT EXISTS (SELECT 1 FROM aion_wake.outbox WHERE dispatch_key = :kid::text);
\elif :o <= 70
WITH c AS (SELECT * FROM aion_wake.fail(:kid::text, 'second settle', make_interval(secs => :fb_ms / 1000.0),
                                        :tok, :m, make_interval(secs => :next_ms / 1000.0)))
SELECT coalesce(f.dispatch_key, '0')::bigint AS nkid, coalesce(f.lease_token, 0) AS ntok
  FROM (SELECT 1) one LEFT JOIN (SELECT * FROM c ORDER BY dispatch_key LIMIT 1) f ON true \gset
INSERT INTO stress_log (dispatch_key, op, lease_token)
SELECT :kid::text, 'fail', :tok
  FROM aion_wake.outbox o
 WHERE o.dispatch_key = :kid::text AND o.attempt = :att + 2
   AND EXISTS (SELECT 1 FROM stress_log WHERE xid = pg_current_xact_id() AND op = 'fail'
                  AND dispatch_key = :kid::text);
\else
WITH c AS (SELECT * FROM aion_wake.dead_letter(:kid::text, 'second settle', :tok, :m,
                                               make_interval(secs => :next_ms / 1000.0)))
SELECT coalesce(f.dispatch_key, '0')::bigint AS nkid, coalesce(f.lease_token, 0) AS ntok
  FROM (SELECT 1) one LEFT JOIN (SELECT * FROM c ORDER BY dispatch_key LIMIT 1) f ON true \gset
INSERT INTO stress_log (dispatch_key, op, lease_token)
SELECT :kid::text, 'dead_letter', :tok
 WHERE EXISTS (SELECT 1 FROM stress_log WHERE xid = pg_current_xact_id() AND op = 'park'
                  AND dispatch_key = :kid::text)
   AND NOT EXISTS (SELECT 1 FROM aion_wake.outbox WHERE dispatch_key = :kid::text);
\endif
\if :rb <= 12
ROLLBACK;
INSERT INTO stress_log (dispatch_key, op, lease_token) VALUES (:kid::text, 'note_settles_rolled_back', :tok);
\else
COMMIT;
\set skid :nkid
\set stok :ntok
\endif
\endif
