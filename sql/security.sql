--
-- security: nothing is usable by PUBLIC but the status view; the GRANTs
-- README gives an application role are enough; search_path cannot hijack
-- the statements the functions run.
--
CREATE ROLE aw_nobody LOGIN;
CREATE ROLE aw_app LOGIN;

-- what README tells users to grant an application role
GRANT USAGE ON SCHEMA aion_wake TO aw_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON aion_wake.outbox TO aw_app;
GRANT SELECT, INSERT, UPDATE ON aion_wake.dead_letters TO aw_app;
GRANT SELECT ON aion_wake.limits, aion_wake.rates, aion_wake.pauses TO aw_app;
GRANT USAGE ON SEQUENCE aion_wake.lease_token_seq TO aw_app;
GRANT EXECUTE ON FUNCTION
	aion_wake.enqueue(text, jsonb, text, interval, int),
	aion_wake.claim(text, int, interval, interval),
	aion_wake.claim(text[], int, interval, interval),
	aion_wake.complete(text, bigint),
	aion_wake.complete(text, bigint, int, interval),
	aion_wake.fail(text, text, interval, bigint),
	aion_wake.fail(text, text, interval, bigint, int, interval),
	aion_wake.park(text, interval, bigint),
	aion_wake.park(text, interval, bigint, int, interval),
	aion_wake.dead_letter(text, text, bigint),
	aion_wake.dead_letter(text, text, bigint, int, interval),
	aion_wake.complete_many(text[], bigint[]),
	aion_wake.complete_many(text[], bigint[], int, interval),
	aion_wake.fail_many(text[], text, interval, bigint[]),
	aion_wake.fail_many(text[], text, interval, bigint[], int, interval),
	aion_wake.park_many(text[], interval, bigint[]),
	aion_wake.park_many(text[], interval, bigint[], int, interval),
	aion_wake.dead_letter_many(text[], text, bigint[]),
	aion_wake.dead_letter_many(text[], text, bigint[], int, interval),
	aion_wake.pulse(text, int)
	TO aw_app;
-- and for the 429 wiring (pause on Retry-After)
GRANT INSERT, UPDATE, DELETE ON aion_wake.pauses TO aw_app;
GRANT EXECUTE ON FUNCTION aion_wake.pause(text, timestamptz), aion_wake.resume(text) TO aw_app;

-- which functions can PUBLIC execute?
SELECT p.proname
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = 'aion_wake'
   AND has_function_privilege('aw_nobody', p.oid, 'EXECUTE')
 ORDER BY 1;
SELECT c.relname, has_table_privilege('aw_nobody', c.oid, 'SELECT') AS can_select
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'aion_wake' AND c.relkind IN ('r', 'v')
 ORDER BY 1;

SET ROLE aw_nobody;
SELECT count(*) FROM aion_wake.status;
SELECT aion_wake.enqueue('sec1');
SELECT aion_wake.pulse();
SELECT * FROM aion_wake.parked;
SELECT aion_wake.park_pending('x');
SELECT * FROM aion_wake.outbox;
RESET ROLE;

SET ROLE aw_app;
SELECT aion_wake.enqueue('sec1', '{}', 'sec');
SELECT aion_wake.enqueue('sec2', '{}', 'sec');
SELECT dispatch_key FROM aion_wake.claim('sec', 1);
SELECT aion_wake.park('sec1', '1 hour');
SELECT aion_wake.pulse('sec');
SELECT aion_wake.fail('sec2', 'err', '0');
SELECT aion_wake.dead_letter('sec2', 'bad');
SELECT aion_wake.reoffer('sec', 1);
SELECT aion_wake.abandon('sec1');
SELECT aion_wake.set_limit('seclim', 1);
RESET ROLE;

-- the worker answers the pulse by re-offering sec1, in its own time: wait
-- until the re-offer has committed and left the set, so that sec1 is
-- claimable now (the application role takes and completes it) and is not
-- moved ahead of the seclim rows while the claims below run
CALL wait_reoffered('sec1');
SET ROLE aw_app;
SELECT dispatch_key, parked_at IS NULL AS unparked FROM aion_wake.claim('sec');
SELECT aion_wake.complete('sec1');
RESET ROLE;

-- the 1.1 entry points, as the application role, on a limited topic
SELECT aion_wake.set_limit('seclim', 1);
SET ROLE aw_app;
SELECT aion_wake.enqueue('sl' || g, '{}', 'seclim') FROM generate_series(1, 2) g;
SELECT dispatch_key AS sl_key, lease_token AS sl_token
  FROM aion_wake.claim(ARRAY['seclim', 'sec'], 1) \gset
SELECT count(*) AS no_slot FROM aion_wake.claim('seclim');
SELECT dispatch_key FROM aion_wake.complete(:'sl_key', :sl_token, 1, '30 s');
SELECT dispatch_key FROM aion_wake.park('sl2', '1 hour', NULL, 1, '30 s');
RESET ROLE;

-- the 1.2 batch settles, as the application role: every form, and a real
-- batch hand-off (the table privileges above are enough for it)
SET ROLE aw_app;
SELECT aion_wake.complete_many('{}', '{}') AS complete_many,
       aion_wake.fail_many('{}', 'e', '0', '{}') AS fail_many,
       aion_wake.park_many('{}', '1 s', '{}') AS park_many,
       aion_wake.dead_letter_many('{}', 'r', '{}') AS dead_letter_many;
SELECT (SELECT count(*) FROM aion_wake.complete_many('{}', '{}', 1)) AS complete_next,
       (SELECT count(*) FROM aion_wake.fail_many('{}', 'e', '0', '{}', 1)) AS fail_next,
       (SELECT count(*) FROM aion_wake.park_many('{}', '1 s', '{}', 1)) AS park_next,
       (SELECT count(*) FROM aion_wake.dead_letter_many('{}', 'r', '{}', 1)) AS dead_letter_next;
SELECT count(aion_wake.enqueue('sb' || g, '{}', 'secb')) FROM generate_series(1, 4) g;
SELECT array_agg(dispatch_key ORDER BY dispatch_key) AS sb_keys,
       array_agg(lease_token ORDER BY dispatch_key) AS sb_tokens
  FROM aion_wake.claim('secb', 2) \gset
SELECT dispatch_key FROM aion_wake.complete_many(:'sb_keys', :'sb_tokens', next_rows => 1);
SELECT aion_wake.dead_letter_many(ARRAY['sb3'],  'r',
                                  ARRAY[(SELECT lease_token FROM aion_wake.outbox
                                          WHERE dispatch_key = 'sb3')]) AS dead;
RESET ROLE;
SELECT aion_wake.set_limit('seclim', NULL);

-- the 1.2 rates and pauses, as the application role: it claims within a
-- rate, and pauses and resumes a topic (the 429 wiring); set_rate is an
-- operator's
SELECT aion_wake.set_rate('secr', 2, '1 hour');
SET ROLE aw_app;
SELECT aion_wake.set_rate('secr', 5, '1 hour');
SELECT count(aion_wake.enqueue('sr' || g, '{}', 'secr')) FROM generate_series(1, 4) g;
SELECT dispatch_key FROM aion_wake.claim('secr', 1);
BEGIN;
SELECT aion_wake.park('sr1', '1 hour');
SELECT aion_wake.pause('secr', clock_timestamp() + interval '1 hour');
COMMIT;
SELECT count(*) AS paused FROM aion_wake.claim('secr', 2);
SELECT aion_wake.resume('secr');
SELECT count(*) AS within_the_rate FROM aion_wake.claim('secr', 3);
RESET ROLE;
SELECT aion_wake.set_rate('secr', NULL);
DELETE FROM aion_wake.outbox WHERE topic = 'secr';

-- search_path: an operator and functions planted ahead of pg_catalog
CREATE SCHEMA evil;
CREATE FUNCTION evil.texteq_always(text, text) RETURNS boolean
	LANGUAGE sql IMMUTABLE AS 'SELECT true';
CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.texteq_always);
CREATE FUNCTION evil.clock_timestamp() RETURNS timestamptz
	LANGUAGE sql AS $$SELECT '2000-01-01'::timestamptz$$;
CREATE FUNCTION evil.nextval(regclass) RETURNS bigint
	LANGUAGE sql AS 'SELECT 42::bigint';
GRANT USAGE ON SCHEMA evil TO PUBLIC;
SELECT aion_wake.enqueue('h1', '{}', 'hijack');
SELECT aion_wake.enqueue('h2', '{}', 'hijack');
SET search_path = evil, pg_catalog, public;
SELECT 'a' = 'b' AS hijacked_operator_in_effect;
SELECT aion_wake.complete('h1');
SELECT count(*) AS rows_left FROM aion_wake.outbox WHERE topic OPERATOR(pg_catalog.=) 'hijack';
SELECT lease_token OPERATOR(pg_catalog.<>) 42 AS real_token,
       enqueued_at OPERATOR(pg_catalog.>) '2001-01-01' AS real_clock
  FROM aion_wake.claim('hijack');
RESET search_path;
DROP SCHEMA evil CASCADE;

DROP OWNED BY aw_app;
DROP ROLE aw_app;
DROP ROLE aw_nobody;
