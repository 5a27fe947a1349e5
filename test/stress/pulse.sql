-- test/stress/pulse.sql: capacity frees.  pulse(topic, 1-4), raw NOTIFY
-- 'topic:k' and 'topic', pulses rolled back (must deliver nothing), several
-- pulses in one transaction (they add up), a malformed payload (ignored and
-- counted), now and then a big pulse (5-40 slots; 200-600 when the set is
-- nearly full, so that it fills and drains in turn), and reoffer() run by a
-- client, committed or rolled back (its entries must then come back to the
-- set).
\set t random(0, 2)
\set k random(1, 4)
\set p random(1, 100)
\if :p <= 35
SELECT aion_wake.pulse('t' || :t, :k);
\elif :p <= 55
SELECT pg_notify('aion_wake_capacity', 't' || :t || ':' || :k);
\elif :p <= 62
SELECT pg_notify('aion_wake_capacity', 't' || :t);
\elif :p <= 70
BEGIN;
SELECT aion_wake.pulse('t' || :t, :k);
ROLLBACK;
\elif :p <= 80
BEGIN;
SELECT aion_wake.pulse('t' || :t, 1);
SELECT aion_wake.pulse('t' || ((:t + 1) % 3), :k);
SELECT aion_wake.pulse('t' || :t, :k);
COMMIT;
\elif :p <= 82
SELECT pg_notify('aion_wake_capacity', 't' || :t || ':none');
\elif :p <= 85
-- a consumer pool that comes back: a big pulse (many re-offers in one
-- batch); a very big one when the set is (nearly) full, which drains it
\set big random(5, 40)
\set huge random(200, 600)
SELECT aion_wake.pulse('t' || :t,
       CASE WHEN (SELECT parked_confirmed + parked_pending FROM aion_wake.status) >= 950
            THEN :huge ELSE :big END);
\else
BEGIN;
SELECT aion_wake.reoffer('t' || :t, :k);
\if :p <= 93
COMMIT;
\else
ROLLBACK;
\endif
\endif
