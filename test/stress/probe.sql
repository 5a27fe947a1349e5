-- test/stress/probe.sql: a G2 probe that can be checked while the load runs.
-- Each client has a topic of its own, p<client_id>, that nothing else
-- touches.  A new row there is claimed and parked for 1 hour; then one
-- slot is pulsed:
--   mode 1: pulse() from another session (dblink) while the park is still
--           pending: the wake must be recorded on the entry and acted on at
--           commit;
--   mode 2: a raw NOTIFY 'p<id>:1' from another session while pending;
--   mode 3: pulse() after the park committed;
--   mode 4: a 20 ms back-off, pulse() from another session while pending,
--           and a commit after the fence has passed: the wake then finds a
--           row that is claimable already, and must move nothing (its
--           fence passed, so its slot goes back: doc/design.md, The three
--           steps); the checker flags a re-offer that pushed a passed fence
--           later.
-- In modes 1-3 the row is the only one parked in its topic, so it must come
-- back: a claim that waits up to 10 s must get it (50 s more are allowed
-- for a stalled machine: probe_slow).  If it does not, although the park
-- entered the set, probe_miss is logged and the checker fails (probe_ok
-- when it does; probe_skipped when the set was full, and in mode 4).  The
-- row is then completed, so the next probe starts from an empty topic.
\set mode random(1, 4)
\set linger_ms random(0, 200)
\set backoff_ms 3600000
\if :mode = 4
\set linger_ms random(80, 200)
\set backoff_ms 20
\endif
SELECT nextval('stress_key_seq') AS pk \gset
BEGIN;
INSERT INTO stress_log (dispatch_key, op)
SELECT :pk::text, 'enqueue' WHERE aion_wake.enqueue(:pk::text, '{}', 'p' || :client_id);
COMMIT;
WITH c AS (SELECT * FROM aion_wake.claim('p' || :client_id, 1, '1 hour'))
SELECT (SELECT count(*) FROM c) AS pn, coalesce((SELECT lease_token FROM c), 0) AS ptok \gset
BEGIN;
INSERT INTO stress_log (dispatch_key, op, lease_token)
SELECT :pk::text, 'park', :ptok
 WHERE aion_wake.park(:pk::text, make_interval(secs => :backoff_ms / 1000.0), :ptok);
INSERT INTO stress_log (dispatch_key, op, fence)
SELECT dispatch_key, 'in_set', fence FROM aion_wake.parked
 WHERE owner_pid = pg_backend_pid() AND state = 'pending';
SELECT count(*) AS pin FROM aion_wake.parked
 WHERE dispatch_key = :pk::text AND owner_pid = pg_backend_pid() AND state = 'pending' \gset
\if :mode = 1 or :mode = 4
SELECT * FROM dblink((SELECT dsn FROM stress_conf),
                      'SELECT aion_wake.pulse(''p' || :client_id || ''', 1)::text') AS t(r text);
\elif :mode = 2
SELECT dblink_exec((SELECT dsn FROM stress_conf), 'NOTIFY aion_wake_capacity, ''p' || :client_id || ':1''');
\endif
\sleep :linger_ms ms
COMMIT;
\if :mode = 3
SELECT aion_wake.pulse('p' || :client_id, 1);
\endif
WITH c AS (SELECT * FROM aion_wake.claim('p' || :client_id, 1, '30 s', '10 s'))
SELECT (SELECT count(*) FROM c) AS got, coalesce((SELECT lease_token FROM c), 0) AS gtok \gset
\set slow 0
\if :got = 0 and :mode < 4
-- not within 10 s: a stalled machine, or a lost wake?  A lost wake never
-- comes back (the fence is an hour away); give a stall 50 s more.
WITH c AS (SELECT * FROM aion_wake.claim('p' || :client_id, 1, '30 s', '50 s'))
SELECT (SELECT count(*) FROM c) AS got, coalesce((SELECT lease_token FROM c), 0) AS gtok \gset
\set slow 1
\endif
\if :got = 0
\set gtok :ptok
\endif
\if :pin = 0 or :pn = 0 or :mode = 4
INSERT INTO stress_log (dispatch_key, op, attempt) VALUES (:pk::text, 'probe_skipped', :mode);
\elif :got = 0
INSERT INTO stress_log (dispatch_key, op, attempt) VALUES (:pk::text, 'probe_miss', :mode);
\elif :slow = 1
INSERT INTO stress_log (dispatch_key, op, attempt) VALUES (:pk::text, 'probe_slow', :mode);
\else
INSERT INTO stress_log (dispatch_key, op, attempt) VALUES (:pk::text, 'probe_ok', :mode);
\endif
BEGIN;
INSERT INTO stress_log (dispatch_key, op, lease_token)
SELECT :pk::text, 'complete', :gtok WHERE aion_wake.complete(:pk::text, :gtok);
COMMIT;
