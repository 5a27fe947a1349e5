-- test/stress/retake.sql (mode two): a row re-taken by the transaction that
-- settled it, then rolled back.  Each client has a limited topic of its
-- own, 'r' || client_id, limit 1 (run.sh sets it), holding one or two rows,
-- so that the row it settles with back-off 0 is the only visible row and
-- the claim after the settle takes that same row again.
--   1. enqueue a row into the topic if it is empty; claim one row (a
--      committed lease)
--   2. one transaction: fail or park it with back-off 0, claim the topic
--      again (takes the same row, a new token), then
--        1-45   ROLLBACK
--        46-70  all of it in a savepoint, ROLLBACK TO SAVEPOINT, COMMIT
--        71-100 all of it in a savepoint, ROLLBACK TO SAVEPOINT, complete
--               the row with its first token, COMMIT
--      The first lease is live again after either rollback: its slot is
--      held, whatever the rolled-back settle and claim did to the record.
--   3. a second row into the topic and a claim of it, without waiting: while
--      the first lease is live the limit must refuse it (the G8 check of
--      the ledger sees two leases of a topic whose limit is 1)
--   4. complete both rows with the tokens claimed, in one transaction
-- The leases are 1-4 s, so the first one is nearly always still live at 3.
-- A re-take that rolled back leaves a note on the row in the ledger
-- (note_retaken_rolled_back, ..._to_savepoint), for the checker's "why".
\set lease_ms random(1000, 4000)
\set v random(1, 100)
\set how random(1, 2)
WITH k AS (SELECT nextval('stress_key_seq')::text AS k
            WHERE NOT EXISTS (SELECT 1 FROM aion_wake.outbox WHERE topic = 'r' || :client_id)),
     e AS (SELECT k FROM k WHERE aion_wake.enqueue(k, '{}', 'r' || :client_id))
INSERT INTO stress_log (dispatch_key, op) SELECT k, 'enqueue' FROM e;
WITH c AS (SELECT * FROM aion_wake.claim('r' || :client_id, 1, make_interval(secs => :lease_ms / 1000.0)))
SELECT (SELECT count(*) FROM c) AS n,
       coalesce(f.dispatch_key, '0')::bigint AS kid,
       coalesce(f.lease_token, 0) AS tok
  FROM (SELECT 1) one LEFT JOIN c f ON true \gset
\if :n > 0
BEGIN;
\if :v > 45
SAVEPOINT retake;
\endif
\if :how = 1
INSERT INTO stress_log (dispatch_key, op, lease_token)
SELECT :kid::text, 'fail', :tok WHERE aion_wake.fail(:kid::text, 'settled, then taken again', '0', :tok);
\else
INSERT INTO stress_log (dispatch_key, op, lease_token)
SELECT :kid::text, 'park', :tok WHERE aion_wake.park(:kid::text, '0', :tok);
\endif
SELECT count(*) AS retaken FROM aion_wake.claim('r' || :client_id, 1, make_interval(secs => :lease_ms / 1000.0)) \gset
\if :v <= 45
ROLLBACK;
\if :retaken > 0
INSERT INTO stress_log (dispatch_key, op, lease_token) VALUES (:kid::text, 'note_retaken_rolled_back', :tok);
\endif
\else
ROLLBACK TO SAVEPOINT retake;
\if :retaken > 0
INSERT INTO stress_log (dispatch_key, op, lease_token) VALUES (:kid::text, 'note_retaken_rolled_back_to_savepoint', :tok);
\endif
\if :v > 70
INSERT INTO stress_log (dispatch_key, op, lease_token)
SELECT :kid::text, 'complete', :tok WHERE aion_wake.complete(:kid::text, :tok);
\endif
COMMIT;
\endif
WITH k AS (SELECT nextval('stress_key_seq')::text AS k),
     e AS (SELECT k FROM k WHERE aion_wake.enqueue(k, '{}', 'r' || :client_id))
INSERT INTO stress_log (dispatch_key, op) SELECT k, 'enqueue' FROM e;
WITH c AS (SELECT * FROM aion_wake.claim('r' || :client_id, 1, make_interval(secs => :lease_ms / 1000.0)))
SELECT coalesce(f.dispatch_key, '0')::bigint AS kid2, coalesce(f.lease_token, 0) AS tok2
  FROM (SELECT 1) one LEFT JOIN c f ON true \gset
BEGIN;
INSERT INTO stress_log (dispatch_key, op, lease_token)
SELECT :kid::text, 'complete', :tok WHERE aion_wake.complete(:kid::text, :tok);
INSERT INTO stress_log (dispatch_key, op, lease_token)
SELECT :kid2::text, 'complete', :tok2 WHERE :kid2 > 0 AND aion_wake.complete(:kid2::text, :tok2);
COMMIT;
\endif
