/* aion_wake--1.0--1.1.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION aion_wake UPDATE TO '1.1'" to load this file. \quit

-- Version 1.1: known capacity (limits), one waiter for many topics, the
-- zero-gap hand-off.  A
-- fresh CREATE EXTENSION runs aion_wake--1.0.sql and then this script, so a
-- fresh install and an updated one are the same schema, new columns last.
-- As in 1.0, every object is schema-qualified and every operator is
-- written OPERATOR(pg_catalog.x).

-- The durable record of a live lease: set by each claim to its lease's
-- end, cleared when the lease is settled.  Rows claimed under 1.0 carry
-- their lease only in visible_after; a row that has a lease token, is not
-- parked and whose fence is ahead is counted as leased until that fence
-- (it may instead be waiting out a fail() back-off: counting it errs on
-- the side of fewer leases granted, never more).
ALTER TABLE aion_wake.outbox ADD COLUMN leased_until timestamptz;
UPDATE aion_wake.outbox SET leased_until = visible_after
 WHERE lease_token IS NOT NULL AND parked_at IS NULL
   AND visible_after OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp();
ALTER TABLE aion_wake.dead_letters ADD COLUMN leased_until timestamptz;

-- Known capacity: at most max_in_flight rows of a topic leased at once.
-- Written only through set_limit(); read by the worker at start.
CREATE TABLE aion_wake.limits (
	topic         text PRIMARY KEY
		CHECK (topic OPERATOR(pg_catalog.~) '^[A-Za-z0-9_.-]{1,63}$'),
	max_in_flight int NOT NULL
		CHECK (max_in_flight OPERATOR(pg_catalog.>=) 1
			   AND max_in_flight OPERATOR(pg_catalog.<=) 1000000),
	updated_at    timestamptz NOT NULL
);
SELECT pg_catalog.pg_extension_config_dump('aion_wake.limits', '');

CREATE FUNCTION aion_wake.set_limit(topic text, max_in_flight int)
RETURNS void
AS 'MODULE_PATHNAME', 'aw_set_limit'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;

-- One waiter, many topics.
CREATE FUNCTION aion_wake.claim(topics text[], max_rows int DEFAULT 1,
								lease interval DEFAULT '30s',
								wait interval DEFAULT '0')
RETURNS SETOF aion_wake.outbox
AS 'MODULE_PATHNAME', 'aw_claim_topics'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE ROWS 1;

-- The zero-gap hand-off: settle and take the next rows of the same topic
-- in one statement and one transaction.  The forms with next_rows return
-- the rows taken (none when the settle found no row).
CREATE FUNCTION aion_wake.complete(dispatch_key text, lease_token bigint,
								   next_rows int, lease interval DEFAULT '30s')
RETURNS SETOF aion_wake.outbox
AS 'MODULE_PATHNAME', 'aw_complete_next'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE ROWS 1;

CREATE FUNCTION aion_wake.fail(dispatch_key text, error text, backoff interval,
							   lease_token bigint, next_rows int,
							   lease interval DEFAULT '30s')
RETURNS SETOF aion_wake.outbox
AS 'MODULE_PATHNAME', 'aw_fail_next'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE ROWS 1;

CREATE FUNCTION aion_wake.park(dispatch_key text, backoff interval, lease_token bigint,
							   next_rows int, lease interval DEFAULT '30s')
RETURNS SETOF aion_wake.outbox
AS 'MODULE_PATHNAME', 'aw_park_next'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE ROWS 1;

CREATE FUNCTION aion_wake.dead_letter(dispatch_key text, reason text, lease_token bigint,
									  next_rows int, lease interval DEFAULT '30s')
RETURNS SETOF aion_wake.outbox
AS 'MODULE_PATHNAME', 'aw_dead_letter_next'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE ROWS 1;

-- The views gain columns: drop and make them again.
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
	OUT lease_capacity int, OUT leases bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'aw_status'
LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE VIEW aion_wake.status AS SELECT * FROM aion_wake.status_internal();

ALTER EXTENSION aion_wake DROP VIEW aion_wake.topics;
ALTER EXTENSION aion_wake DROP FUNCTION aion_wake.topics_internal();
DROP VIEW aion_wake.topics;
DROP FUNCTION aion_wake.topics_internal();

CREATE FUNCTION aion_wake.topics_internal(
	OUT topic text, OUT parked bigint, OUT unspent_slots bigint,
	OUT credit bigint, OUT waiters int, OUT pulses bigint, OUT reoffered bigint,
	OUT max_in_flight int, OUT in_flight int)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'aw_topics_view'
LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE VIEW aion_wake.topics AS SELECT * FROM aion_wake.topics_internal();

-- Privileges, as in 1.0: nothing for PUBLIC but the status view.
REVOKE ALL ON aion_wake.limits FROM PUBLIC;
REVOKE ALL ON FUNCTION aion_wake.set_limit(text, int) FROM PUBLIC;
REVOKE ALL ON FUNCTION aion_wake.claim(text[], int, interval, interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION aion_wake.complete(text, bigint, int, interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION aion_wake.fail(text, text, interval, bigint, int, interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION aion_wake.park(text, interval, bigint, int, interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION aion_wake.dead_letter(text, text, bigint, int, interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION aion_wake.status_internal() FROM PUBLIC;
REVOKE ALL ON FUNCTION aion_wake.topics_internal() FROM PUBLIC;
REVOKE ALL ON aion_wake.topics FROM PUBLIC;
GRANT EXECUTE ON FUNCTION aion_wake.status_internal() TO PUBLIC;
GRANT SELECT ON aion_wake.status TO PUBLIC;
