-- test/stress/rated.sql: a dispatcher of the rated topics (G10; setup.sql
-- sets q0 5 per 200 ms, q1 2 per 1 s with a limit of 1, q2 300 per 500 ms,
-- q3 4 per 3 s).  A claim of one of them, of 1-4 rows (q2: 10-320, more
-- than a window admits now and then), half the time blocking up to 1.2 s, by
--   1-70   claim(topic)
--   71-85  claim(ARRAY[topic, 't1'])
--   86-100 claim(ARRAY['q2', 'q1', 'q0'])
-- 12% in a transaction rolled back; then, for a claim that committed, in a
-- transaction of its own (10% rolled back):
--   1-30   complete(first row, next_rows 1-4): the single-row hand-off
--   31-50  complete_many(every row, next_rows 1-4 (q2: up to 320)): the
--          batch hand-off
--   51-65  park the first row (back-off 0-2 s, or 1 hour), with a pulse
--          of its topic (q0, q2, q3: not the limited q1) 70% of the time:
--          a claimer blocked on the topic spends it on a parked row (a
--          claiming round spending a pulse), or the worker re-offers one
--   66-100 nothing: the leases expire and the rows are claimable again
-- Every row a claim or a hand-off returned is a start: it is logged in
-- stress_starts by the statement that took it, at leased_until - lease;
-- when its transaction rolls back that entry goes with it, so the script
-- keeps the rows (\gset, a VALUES list) and logs them again after the
-- ROLLBACK.  (A client cut off between the two, by mode two's restarts,
-- loses them: the check then sees fewer starts, never more.)  The settles
-- are logged in stress_log as dispatch.sql's are (a row this transaction
-- deleted was completed by it), and as many new rows are enqueued in the
-- settled rows' topics as were completed, so that the topics do not run
-- dry.
\set q random(0, 3)
\set f random(1, 100)
\set m random(1, 4)
\set lease_ms random(150, 1500)
\if :q = 2
\set m random(10, 320)
\set lease_ms random(100, 600)
\endif
\if :f > 70
\set m random(1, 40)
\endif
\set w random(1, 100)
\set wait_ms random(50, 1200)
\if :w > 50
\set wait_ms 0
\endif
\set cr random(1, 100)
\if :cr <= 12
BEGIN;
\endif
\if :f <= 70
WITH c AS (SELECT *, leased_until - make_interval(secs => :lease_ms / 1000.0) AS s
             FROM aion_wake.claim('q' || :q, :m, make_interval(secs => :lease_ms / 1000.0),
                                  make_interval(secs => :wait_ms / 1000.0))),
     l AS (INSERT INTO stress_starts (topic, dispatch_key, lease_token, start_at, how)
           SELECT topic, dispatch_key, lease_token, s, 'claim' FROM c)
SELECT (SELECT count(*) FROM c) AS n,
       (SELECT coalesce(string_agg(format('(%L, %L, %s, %L::timestamptz)', topic, dispatch_key, lease_token, s),
                                   ', '), '') FROM c) AS sv,
       (SELECT coalesce(string_agg(dispatch_key, ', ' ORDER BY dispatch_key), '') FROM c) AS keys,
       (SELECT coalesce(string_agg(lease_token::text, ', ' ORDER BY dispatch_key), '') FROM c) AS toks,
       coalesce(f.dispatch_key, '0')::bigint AS kid,
       coalesce(f.lease_token, 0) AS tok
  FROM (SELECT 1) one LEFT JOIN (SELECT * FROM c ORDER BY dispatch_key LIMIT 1) f ON true \gset
\else
WITH c AS (SELECT *, leased_until - make_interval(secs => :lease_ms / 1000.0) AS s
             FROM aion_wake.claim(CASE WHEN :f <= 85 THEN ARRAY['q' || :q, 't1'] ELSE ARRAY['q2', 'q1', 'q0'] END,
                                  :m, make_interval(secs => :lease_ms / 1000.0),
                                  make_interval(secs => :wait_ms / 1000.0))),
     l AS (INSERT INTO stress_starts (topic, dispatch_key, lease_token, start_at, how)
           SELECT topic, dispatch_key, lease_token, s, 'claim_topics' FROM c)
SELECT (SELECT count(*) FROM c) AS n,
       (SELECT coalesce(string_agg(format('(%L, %L, %s, %L::timestamptz)', topic, dispatch_key, lease_token, s),
                                   ', '), '') FROM c) AS sv,
       (SELECT coalesce(string_agg(dispatch_key, ', ' ORDER BY dispatch_key), '') FROM c) AS keys,
       (SELECT coalesce(string_agg(lease_token::text, ', ' ORDER BY dispatch_key), '') FROM c) AS toks,
       coalesce(f.dispatch_key, '0')::bigint AS kid,
       coalesce(f.lease_token, 0) AS tok
  FROM (SELECT 1) one LEFT JOIN (SELECT * FROM c ORDER BY dispatch_key LIMIT 1) f ON true \gset
\endif
\if :cr <= 12
ROLLBACK;
\if :n > 0
INSERT INTO stress_starts (topic, dispatch_key, lease_token, start_at, how)
SELECT t, k, tok, s, CASE WHEN :f <= 70 THEN 'claim' ELSE 'claim_topics' END || '_rolled_back'
  FROM (VALUES :sv) v(t, k, tok, s);
\endif
\set n 0
\endif
\if :n > 0
\set offer_ms random(0, 60)
\sleep :offer_ms ms
\set o random(1, 100)
\set rb random(1, 100)
\set m2 random(1, 4)
\if :q = 2
\set m2 random(1, 320)
\endif
\set lease2_ms random(150, 1500)
\if :o <= 50
BEGIN;
\if :o <= 30
WITH h AS (SELECT *, leased_until - make_interval(secs => :lease2_ms / 1000.0) AS s
             FROM aion_wake.complete(:kid::text, :tok, :m2, make_interval(secs => :lease2_ms / 1000.0))),
     l AS (INSERT INTO stress_starts (topic, dispatch_key, lease_token, start_at, how)
           SELECT topic, dispatch_key, lease_token, s, 'handoff' FROM h)
SELECT count(*) AS hn,
       coalesce(string_agg(format('(%L, %L, %s, %L::timestamptz)', topic, dispatch_key, lease_token, s), ', '), '')
         AS hv
  FROM h \gset
\else
WITH h AS (SELECT *, leased_until - make_interval(secs => :lease2_ms / 1000.0) AS s
             FROM aion_wake.complete_many(ARRAY[:keys]::text[], ARRAY[:toks]::bigint[], :m2,
                                          make_interval(secs => :lease2_ms / 1000.0))),
     l AS (INSERT INTO stress_starts (topic, dispatch_key, lease_token, start_at, how)
           SELECT topic, dispatch_key, lease_token, s, 'handoff_many' FROM h)
SELECT count(*) AS hn,
       coalesce(string_agg(format('(%L, %L, %s, %L::timestamptz)', topic, dispatch_key, lease_token, s), ', '), '')
         AS hv
  FROM h \gset
\endif
-- the rows this transaction deleted are the ones it completed
INSERT INTO stress_log (dispatch_key, op, lease_token)
SELECT dispatch_key, 'complete', lease_token FROM stress_log
 WHERE xid = pg_current_xact_id() AND op = 'row_delete';
WITH k AS (SELECT nextval('stress_key_seq')::text AS k, topic FROM stress_log
            WHERE xid = pg_current_xact_id() AND op = 'row_delete'),
     e AS (SELECT k FROM k WHERE aion_wake.enqueue(k, '{}', topic))
INSERT INTO stress_log (dispatch_key, op) SELECT k, 'enqueue' FROM e;
\if :rb <= 10
ROLLBACK;
\if :hn > 0
INSERT INTO stress_starts (topic, dispatch_key, lease_token, start_at, how)
SELECT t, k, tok, s, CASE WHEN :o <= 30 THEN 'handoff' ELSE 'handoff_many' END || '_rolled_back'
  FROM (VALUES :hv) v(t, k, tok, s);
\endif
\else
COMMIT;
\endif
\elif :o <= 65
\set bo_ms random(0, 2000)
\if :rb <= 30
\set bo_ms 3600000
\endif
\set p random(1, 100)
BEGIN;
INSERT INTO stress_log (dispatch_key, op, lease_token)
SELECT :kid::text, 'park', :tok
 WHERE aion_wake.park(:kid::text, make_interval(secs => :bo_ms / 1000.0), :tok);
INSERT INTO stress_log (dispatch_key, op, fence)
SELECT dispatch_key, 'in_set', fence FROM aion_wake.parked
 WHERE owner_pid = pg_backend_pid() AND state = 'pending';
\if :p <= 70
SELECT aion_wake.pulse(topic, 1) FROM aion_wake.outbox
 WHERE dispatch_key = :kid::text AND topic IN ('q0', 'q2', 'q3');
\endif
\if :rb <= 10
ROLLBACK;
\else
COMMIT;
\endif
\endif
\endif
