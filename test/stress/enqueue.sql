-- test/stress/enqueue.sql: producers.  1-4 new rows into a random topic
-- (t0-t2, or the limited l0 and l1), some with a delay (a fence from the
-- start); the enqueue is logged in the same transaction.  Sometimes the
-- same keys are enqueued again in the transaction (must return false:
-- logged as dup_enqueue if it does not), and 5% of the transactions roll
-- back.
\set t random(1, 5)
\set n random(1, 4)
\set r random(1, 100)
\set delay_ms random(0, 1500)
BEGIN;
WITH k AS (SELECT nextval('stress_key_seq')::text AS k FROM generate_series(1, :n)),
     e AS (SELECT k FROM k
            WHERE aion_wake.enqueue(k, jsonb_build_object('client', :client_id),
                                    (ARRAY['t0', 't1', 't2', 'l0', 'l1'])[:t],
                                    CASE WHEN :r <= 25 THEN make_interval(secs => :delay_ms / 1000.0)
                                         ELSE interval '0' END))
INSERT INTO stress_log (dispatch_key, op) SELECT k, 'enqueue' FROM e;
\if :r > 85
WITH mine AS MATERIALIZED (SELECT dispatch_key FROM stress_log
                            WHERE xid = pg_current_xact_id() AND op = 'enqueue')
INSERT INTO stress_log (dispatch_key, op)
SELECT dispatch_key, 'dup_enqueue' FROM mine
 WHERE aion_wake.enqueue(dispatch_key, '{}', (ARRAY['t0', 't1', 't2', 'l0', 'l1'])[:t]);
\endif
\if :r > 95
ROLLBACK;
\else
COMMIT;
\endif
