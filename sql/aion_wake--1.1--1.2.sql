/* aion_wake--1.1--1.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION aion_wake UPDATE TO '1.2'" to load this file. \quit

-- Version 1.2.  A fresh CREATE EXTENSION runs aion_wake--1.0.sql, then
-- aion_wake--1.0--1.1.sql, then this script, so a fresh install and an
-- updated one are the same schema, new columns last.  As before, every
-- object is schema-qualified and every operator is written
-- OPERATOR(pg_catalog.x).

-- The status view gains limits_not_loaded (claims of a topic whose limit,
-- rate or pause was not loaded yet), claims_rate_delayed and claims_paused
-- (claims a rate or a pause cut short), and lost_wakes (blocked claims that
-- took a row claimable longer than aion_wake.lost_wake_tolerance without a
-- wake; see Monitoring below): drop and make it again.  The library fills
-- the column only when the function's result has it, so it serves a 1.1
-- schema as before.
ALTER EXTENSION aion_wake DROP VIEW aion_wake.status;
ALTER EXTENSION aion_wake DROP FUNCTION aion_wake.status_internal();
DROP VIEW aion_wake.status;
DROP FUNCTION aion_wake.status_internal();

CREATE FUNCTION aion_wake.status_internal(
	OUT worker_pid int, OUT worker_database name, OUT served boolean,
	OUT listening boolean, OUT listen_error text, OUT capacity int,
	OUT parked_pending bigint, OUT parked_confirmed bigint, OUT waiters int,
	OUT pulses_received bigint, OUT slots_received bigint,
	OUT rows_reoffered bigint, OUT wakes_deferred bigint, OUT bad_pulses bigint,
	OUT set_full bigint, OUT fences_expired bigint, OUT unfenced_expired bigint,
	OUT credits_used bigint, OUT slots_returned bigint,
	OUT last_pulse_at timestamptz, OUT started_at timestamptz,
	OUT pulses_ignored bigint, OUT leases_expired bigint,
	OUT lease_capacity int, OUT leases bigint,
	OUT limits_not_loaded bigint, OUT claims_rate_delayed bigint,
	OUT claims_paused bigint, OUT lost_wakes bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'aw_status'
LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE VIEW aion_wake.status AS SELECT * FROM aion_wake.status_internal();

REVOKE ALL ON FUNCTION aion_wake.status_internal() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION aion_wake.status_internal() TO PUBLIC;
GRANT SELECT ON aion_wake.status TO PUBLIC;


-- Batch settles: many leased rows settled in one statement, each with the
-- token of its lease, with one error, back-off or reason for all of them.
-- The forms without next_rows return the number of rows settled; those
-- with next_rows take up to next_rows rows in all from the settled rows'
-- topics, in the same statement, and return them leased.  The arrays come
-- where the single-row forms take dispatch_key and lease_token.  They are
-- named apart (complete_many, not a complete(text[], bigint[])): beside
-- such an overload, complete($1, $2) with untyped parameters, as many
-- drivers send them, or complete('k', NULL) would no longer resolve
-- (42725, not unique: unknown against bigint and bigint[]).
CREATE FUNCTION aion_wake.complete_many(dispatch_keys text[], lease_tokens bigint[])
RETURNS int
AS 'MODULE_PATHNAME', 'aw_complete_batch'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION aion_wake.complete_many(dispatch_keys text[], lease_tokens bigint[],
								   next_rows int, lease interval DEFAULT '30s')
RETURNS SETOF aion_wake.outbox
AS 'MODULE_PATHNAME', 'aw_complete_batch_next'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE ROWS 10;

CREATE FUNCTION aion_wake.fail_many(dispatch_keys text[], error text, backoff interval,
							   lease_tokens bigint[])
RETURNS int
AS 'MODULE_PATHNAME', 'aw_fail_batch'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION aion_wake.fail_many(dispatch_keys text[], error text, backoff interval,
							   lease_tokens bigint[], next_rows int,
							   lease interval DEFAULT '30s')
RETURNS SETOF aion_wake.outbox
AS 'MODULE_PATHNAME', 'aw_fail_batch_next'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE ROWS 10;

CREATE FUNCTION aion_wake.park_many(dispatch_keys text[], backoff interval,
							   lease_tokens bigint[])
RETURNS int
AS 'MODULE_PATHNAME', 'aw_park_batch'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION aion_wake.park_many(dispatch_keys text[], backoff interval,
							   lease_tokens bigint[], next_rows int,
							   lease interval DEFAULT '30s')
RETURNS SETOF aion_wake.outbox
AS 'MODULE_PATHNAME', 'aw_park_batch_next'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE ROWS 10;

CREATE FUNCTION aion_wake.dead_letter_many(dispatch_keys text[], reason text,
									  lease_tokens bigint[])
RETURNS int
AS 'MODULE_PATHNAME', 'aw_dead_letter_batch'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION aion_wake.dead_letter_many(dispatch_keys text[], reason text,
									  lease_tokens bigint[], next_rows int,
									  lease interval DEFAULT '30s')
RETURNS SETOF aion_wake.outbox
AS 'MODULE_PATHNAME', 'aw_dead_letter_batch_next'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE ROWS 10;

REVOKE ALL ON FUNCTION aion_wake.complete_many(text[], bigint[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION aion_wake.complete_many(text[], bigint[], int, interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION aion_wake.fail_many(text[], text, interval, bigint[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION aion_wake.fail_many(text[], text, interval, bigint[], int, interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION aion_wake.park_many(text[], interval, bigint[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION aion_wake.park_many(text[], interval, bigint[], int, interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION aion_wake.dead_letter_many(text[], text, bigint[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION aion_wake.dead_letter_many(text[], text, bigint[], int, interval) FROM PUBLIC;

-- Rates and pauses.  A rate: at most max_starts claims of a topic start in
-- any window of length per (every row a claim or a hand-off takes is a
-- start).  A pause: no claim takes a row of the topic before paused_until.
-- Both written only through set_rate(), pause() and resume(), applied at
-- commit, read by the worker at start, kept by pg_dump.
CREATE TABLE aion_wake.rates (
	topic      text PRIMARY KEY
		CHECK (topic OPERATOR(pg_catalog.~) '^[A-Za-z0-9_.-]{1,63}$'),
	max_starts int NOT NULL
		CHECK (max_starts OPERATOR(pg_catalog.>=) 1
			   AND max_starts OPERATOR(pg_catalog.<=) 1000000),
	per        interval NOT NULL
		CHECK (per OPERATOR(pg_catalog.>=) '1 millisecond'::pg_catalog.interval
			   AND per OPERATOR(pg_catalog.<=) '1 day'::pg_catalog.interval),
	updated_at timestamptz NOT NULL
);
SELECT pg_catalog.pg_extension_config_dump('aion_wake.rates', '');

CREATE TABLE aion_wake.pauses (
	topic        text PRIMARY KEY
		CHECK (topic OPERATOR(pg_catalog.~) '^[A-Za-z0-9_.-]{1,63}$'),
	paused_until timestamptz NOT NULL,
	updated_at   timestamptz NOT NULL
);
SELECT pg_catalog.pg_extension_config_dump('aion_wake.pauses', '');

CREATE FUNCTION aion_wake.set_rate(topic text, max_starts int, per interval DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'aw_set_rate'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION aion_wake.pause(topic text, until timestamptz)
RETURNS void
AS 'MODULE_PATHNAME', 'aw_pause'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION aion_wake.resume(topic text)
RETURNS void
AS 'MODULE_PATHNAME', 'aw_resume'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;

REVOKE ALL ON aion_wake.rates FROM PUBLIC;
REVOKE ALL ON aion_wake.pauses FROM PUBLIC;
REVOKE ALL ON FUNCTION aion_wake.set_rate(text, int, interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION aion_wake.pause(text, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION aion_wake.resume(text) FROM PUBLIC;

-- The topics view gains the rate (max_starts, per; null when none), the
-- starts in its window now (reserved ones too), when the next start may
-- begin (null: now), and paused_until (null when not paused).
ALTER EXTENSION aion_wake DROP VIEW aion_wake.topics;
ALTER EXTENSION aion_wake DROP FUNCTION aion_wake.topics_internal();
DROP VIEW aion_wake.topics;
DROP FUNCTION aion_wake.topics_internal();

CREATE FUNCTION aion_wake.topics_internal(
	OUT topic text, OUT parked bigint, OUT unspent_slots bigint,
	OUT credit bigint, OUT waiters int, OUT pulses bigint, OUT reoffered bigint,
	OUT max_in_flight int, OUT in_flight int,
	OUT max_starts int, OUT per interval, OUT window_starts bigint,
	OUT next_start_at timestamptz, OUT paused_until timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'aw_topics_view'
LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE VIEW aion_wake.topics AS SELECT * FROM aion_wake.topics_internal();

REVOKE ALL ON FUNCTION aion_wake.topics_internal() FROM PUBLIC;
REVOKE ALL ON aion_wake.topics FROM PUBLIC;

-- Limits, rates and pauses written other than by set_limit(), set_rate(),
-- pause() and resume() (pg_restore --data-only, the COPY or INSERT of a
-- dump) are in no shared memory: at the commit, the worker of a served
-- database loads them again, as after CREATE EXTENSION, and until it has,
-- claims of those topics take nothing.
CREATE FUNCTION aion_wake.settings_written()
RETURNS trigger
AS 'MODULE_PATHNAME', 'aw_settings_written'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

REVOKE ALL ON FUNCTION aion_wake.settings_written() FROM PUBLIC;

CREATE TRIGGER settings_written AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
	ON aion_wake.limits FOR EACH STATEMENT
	EXECUTE FUNCTION aion_wake.settings_written();
CREATE TRIGGER settings_written AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
	ON aion_wake.rates FOR EACH STATEMENT
	EXECUTE FUNCTION aion_wake.settings_written();
CREATE TRIGGER settings_written AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
	ON aion_wake.pauses FOR EACH STATEMENT
	EXECUTE FUNCTION aion_wake.settings_written();

-- Priorities ---------------------------------------------------------------

-- A row's priority: the higher, the sooner it is claimed (then the oldest
-- fence).  -100 to 100, 0 by default: a small range keeps the claim's
-- walk over the priorities of a topic short (one index probe per distinct
-- priority it passes), and a row can go below the default as well as
-- above it.  Existing rows get the default (ADD COLUMN with a constant
-- default rewrites nothing).  dead_letters keeps the priority a row had.
ALTER TABLE aion_wake.outbox ADD COLUMN priority smallint NOT NULL DEFAULT 0
	CONSTRAINT outbox_priority_range
	CHECK (priority OPERATOR(pg_catalog.>=) -100
		   AND priority OPERATOR(pg_catalog.<=) 100);
ALTER TABLE aion_wake.dead_letters ADD COLUMN priority smallint NOT NULL DEFAULT 0;

-- claims: per topic, the distinct priorities (walked from the highest),
-- then in each the visible rows, oldest fence first.  priority DESC, so
-- that the probe for a topic's highest priority reads the leaf page the
-- claim's range scan reads next (that priority's oldest fences), not the
-- far end of the topic, where every claim writes its new lease's entry.
CREATE INDEX outbox_topic_priority_visible_idx
	ON aion_wake.outbox (topic, priority DESC, visible_after);
-- The claim scans each priority's rows by "topic = t AND priority = p AND
-- visible_after <= now".  Analyzed while every row has one priority, the
-- statistics say "priority = p" keeps every row, and a kept plan made then
-- may scan (topic, visible_after) and filter the priority instead: once
-- rows of other priorities come, it reads them all to find a few.  Telling
-- the planner the column has many values keeps the scan on the index
-- above (test/t/023_kept_plans.pl).
ALTER TABLE aion_wake.outbox ALTER COLUMN priority SET (n_distinct = 100);

-- The outbox's check of a topic's name runs for every row inserted or
-- updated: every enqueue, claim, park and re-offer.  1.0's pattern,
-- '^[A-Za-z0-9_.-]{1,63}$', compiles its bounded repeat into a large
-- automaton, about 27,000 instructions a row on PostgreSQL 15; the same
-- rule as a repeated class and a length took 24,000 fewer a row from a
-- claim and settle of 100 rows, 5,000 fewer from those of one
-- (bench/throughput/count.sh).  One ALTER TABLE: one scan to validate.
-- The limits, rates and pauses keep the pattern: only set_* writes them.
ALTER TABLE aion_wake.outbox
	DROP CONSTRAINT outbox_topic_check,
	ADD CONSTRAINT outbox_topic_check
	CHECK (topic OPERATOR(pg_catalog.~) '^[A-Za-z0-9_.-]+$'
		   AND pg_catalog.octet_length(topic) OPERATOR(pg_catalog.<=) 63);

-- The index of 1.0 on (topic, visible_after) goes: every statement that
-- reads a topic's rows by fence walks the priorities of the index above
-- (AW_TOPIC_PRIORITIES in include/aw_plans.h), and one index fewer is one
-- index entry fewer for every enqueue, claim, park and re-offer to write.
DROP INDEX aion_wake.outbox_topic_visible_idx;

-- Per topic, from the table: the rows claimable now (counted up to
-- count_up_to) and how long the oldest of them has been claimable.  The
-- topics come from a skip scan of outbox_topic_priority_visible_idx, and
-- each count and age from a walk down the topic's priorities, one probe
-- each, and a range scan of each priority's visible rows (as claims walk
-- them, AW_PRIORITY_WALK in include/aw_plans.h: the walk starts at 0 when
-- no row is above it, so that its first probe compares index keys only
-- and reads none of the versions of claimed rows that head priority 0),
-- so the cost grows with the topics and their
-- priorities, not with the rows.  It runs with the caller's rights and
-- reads only the columns topic, priority and visible_after: a monitoring
-- role needs SELECT on those three, never on the payloads (README,
-- Monitoring).
CREATE FUNCTION aion_wake.backlog(count_up_to int DEFAULT 1000,
								  OUT topic text, OUT claimable bigint,
								  OUT oldest_claimable_age interval)
RETURNS SETOF record
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
WITH RECURSIVE t(topic) AS (
	SELECT pg_catalog.min(o.topic) FROM aion_wake.outbox o
  UNION ALL
	SELECT (SELECT pg_catalog.min(o.topic) FROM aion_wake.outbox o
			 WHERE o.topic OPERATOR(pg_catalog.>) t.topic)
	  FROM t WHERE t.topic IS NOT NULL
)
SELECT t.topic, v.claimable, pg_catalog.now() OPERATOR(pg_catalog.-) v.oldest
  FROM t,
	   LATERAL (WITH RECURSIVE r(p) AS (
				  SELECT COALESCE((SELECT o.priority FROM aion_wake.outbox o
									WHERE o.topic OPERATOR(pg_catalog.=) t.topic
									  AND o.priority OPERATOR(pg_catalog.>) 0
									ORDER BY o.priority DESC LIMIT 1), 0)
				UNION ALL
				  SELECT (SELECT o.priority FROM aion_wake.outbox o
						   WHERE o.topic OPERATOR(pg_catalog.=) t.topic
							 AND o.priority OPERATOR(pg_catalog.<) r.p
						   ORDER BY o.priority DESC LIMIT 1)
					FROM r WHERE r.p IS NOT NULL)
				SELECT (SELECT pg_catalog.count(*) FROM
						  (SELECT 1 FROM r,
								  LATERAL (SELECT 1 FROM aion_wake.outbox o
											WHERE o.topic OPERATOR(pg_catalog.=) t.topic
											  AND o.priority OPERATOR(pg_catalog.=) r.p
											  AND o.visible_after OPERATOR(pg_catalog.<=) pg_catalog.now()
											LIMIT count_up_to) x
							LIMIT count_up_to) c) AS claimable,
					   (SELECT pg_catalog.min(x.m) FROM r,
							   LATERAL (SELECT pg_catalog.min(o.visible_after) AS m
										  FROM aion_wake.outbox o
										 WHERE o.topic OPERATOR(pg_catalog.=) t.topic
										   AND o.priority OPERATOR(pg_catalog.=) r.p
										   AND o.visible_after OPERATOR(pg_catalog.<=) pg_catalog.now()) x)
						 AS oldest) v
 WHERE t.topic IS NOT NULL
$$;
REVOKE ALL ON FUNCTION aion_wake.backlog(int) FROM PUBLIC;

-- Monitoring

-- Per topic, what shared memory knows: parks, the limit and its live
-- leases, blocked claimers, and counters kept since the server started
-- (claims, rows claimed, wakes received and those that found a row,
-- blocked claims that ended at their deadline with nothing, lost wakes).
-- Reads no table.
CREATE FUNCTION aion_wake.topic_health_internal(
	OUT topic text, OUT parked_pending bigint, OUT parked_confirmed bigint,
	OUT max_in_flight int, OUT in_flight int, OUT waiters int,
	OUT claims bigint, OUT rows_claimed bigint, OUT wakes bigint,
	OUT wakes_found_row bigint, OUT claims_timed_out bigint,
	OUT lost_wakes bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'aw_topic_health_internal'
LANGUAGE C VOLATILE PARALLEL SAFE;
REVOKE ALL ON FUNCTION aion_wake.topic_health_internal() FROM PUBLIC;

-- Per-topic health: backlog() (rows claimable now and the age of the
-- oldest, one index probe per topic) beside topic_health_internal(), for
-- every topic with rows in the outbox or an entry in shared memory.  With
-- the caller's rights, like backlog(): README, Monitoring, lists the
-- grants a monitoring role needs.
CREATE FUNCTION aion_wake.topic_health(count_up_to int DEFAULT 1000,
	OUT topic text, OUT claimable bigint, OUT oldest_claimable_age interval,
	OUT parked_pending bigint, OUT parked_confirmed bigint,
	OUT max_in_flight int, OUT in_flight int, OUT waiters int,
	OUT claims bigint, OUT rows_claimed bigint, OUT wakes bigint,
	OUT wakes_found_row bigint, OUT claims_timed_out bigint,
	OUT lost_wakes bigint)
RETURNS SETOF record
LANGUAGE sql VOLATILE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT coalesce(b.topic, h.topic),
	   coalesce(b.claimable, 0),
	   b.oldest_claimable_age,
	   coalesce(h.parked_pending, 0), coalesce(h.parked_confirmed, 0),
	   h.max_in_flight, h.in_flight, coalesce(h.waiters, 0),
	   coalesce(h.claims, 0), coalesce(h.rows_claimed, 0),
	   coalesce(h.wakes, 0), coalesce(h.wakes_found_row, 0),
	   coalesce(h.claims_timed_out, 0), coalesce(h.lost_wakes, 0)
  FROM aion_wake.backlog(count_up_to) b
  FULL JOIN aion_wake.topic_health_internal() h
	ON h.topic OPERATOR(pg_catalog.=) b.topic
$$;
REVOKE ALL ON FUNCTION aion_wake.topic_health(int) FROM PUBLIC;

CREATE VIEW aion_wake.topic_health AS SELECT * FROM aion_wake.topic_health();
REVOKE ALL ON aion_wake.topic_health FROM PUBLIC;

-- The claim-wait and claim-latency histograms, one row each, cluster-wide
-- since the server started: le holds the buckets' finite upper bounds in
-- seconds, buckets the count of observations at or below each (the
-- +Inf bucket is count), sum_seconds their sum.  claim_wait: how long a
-- blocked claim waited before it got a row; claim_latency: how long each
-- claimed row had been claimable (from its fence; for a row enqueued
-- without delay, from its enqueue).
CREATE FUNCTION aion_wake.claim_histogram_internal(
	OUT histogram text, OUT le float8[], OUT buckets bigint[],
	OUT count bigint, OUT sum_seconds float8)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'aw_claim_histogram'
LANGUAGE C VOLATILE PARALLEL SAFE;
REVOKE ALL ON FUNCTION aion_wake.claim_histogram_internal() FROM PUBLIC;

CREATE VIEW aion_wake.claim_histogram AS SELECT * FROM aion_wake.claim_histogram_internal();
REVOKE ALL ON aion_wake.claim_histogram FROM PUBLIC;


-- enqueue gains priority, an int (an integer literal such as 5 does not
-- convert to smallint implicitly, so priority => 5 would find no function),
-- checked against the column's range (22023).  A defaulted parameter
-- cannot be added with CREATE OR REPLACE, and a second overload would make
-- enqueue('k') and enqueue('k', '{}') ambiguous, so the function is made
-- again.  Dropping it drops its privileges: the roles that could execute it
-- are named in a WARNING, and README (Priorities) shows the GRANT to run in
-- the same transaction as the update.  (Copying them here would record them
-- as the extension's initial privileges, which pg_dump does not dump.)
DO $$
DECLARE
	r record;
BEGIN
	FOR r IN
		SELECT a.grantee::pg_catalog.regrole AS grantee
		  FROM pg_catalog.pg_proc p,
			   LATERAL pg_catalog.aclexplode(p.proacl) a
		 WHERE p.oid OPERATOR(pg_catalog.=)
			   'aion_wake.enqueue(text, jsonb, text, interval)'::pg_catalog.regprocedure
		   AND a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
		   AND a.grantee OPERATOR(pg_catalog.<>) p.proowner
		   AND a.grantee OPERATOR(pg_catalog.<>) 0::pg_catalog.oid
	LOOP
		RAISE WARNING 'role % loses EXECUTE on aion_wake.enqueue()', r.grantee
			USING DETAIL = 'The update makes enqueue again with a priority parameter.',
				  HINT = 'Grant EXECUTE on aion_wake.enqueue(text, jsonb, text, interval, int) in the same transaction as the update.';
	END LOOP;
END
$$;

ALTER EXTENSION aion_wake DROP FUNCTION aion_wake.enqueue(text, jsonb, text, interval);
DROP FUNCTION aion_wake.enqueue(text, jsonb, text, interval);

CREATE FUNCTION aion_wake.enqueue(dispatch_key text, payload jsonb DEFAULT '{}',
								  topic text DEFAULT 'default',
								  delay interval DEFAULT '0',
								  priority int DEFAULT 0)
RETURNS boolean
AS 'MODULE_PATHNAME', 'aw_enqueue'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;

REVOKE ALL ON FUNCTION aion_wake.enqueue(text, jsonb, text, interval, int) FROM PUBLIC;
