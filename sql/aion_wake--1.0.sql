/* aion_wake--1.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION aion_wake" to load this file. \quit

-- Every object below is schema-qualified and every operator is written
-- OPERATOR(pg_catalog.x), so that nothing depends on the caller's
-- search_path.

CREATE SEQUENCE aion_wake.lease_token_seq;

CREATE TABLE aion_wake.outbox (
	dispatch_key  text PRIMARY KEY
		CHECK (pg_catalog.octet_length(dispatch_key) OPERATOR(pg_catalog.<=) 255
			   AND dispatch_key OPERATOR(pg_catalog.<>) ''),
	topic         text NOT NULL DEFAULT 'default'
		CHECK (topic OPERATOR(pg_catalog.~) '^[A-Za-z0-9_.-]{1,63}$'),
	payload       jsonb NOT NULL DEFAULT '{}',
	attempt       int NOT NULL DEFAULT 0,
	visible_after timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
	enqueued_at   timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
	last_error    text,
	lease_token   bigint,
	parked_at     timestamptz
) WITH (
	-- every update moves an indexed column, so HOT never applies; leave room
	-- on each page anyway and vacuum early and often
	fillfactor = 70,
	autovacuum_vacuum_scale_factor = 0.01,
	autovacuum_vacuum_threshold = 1000,
	autovacuum_vacuum_insert_scale_factor = 0.05,
	autovacuum_analyze_scale_factor = 0.02,
	autovacuum_vacuum_cost_delay = 0
);

-- claims: visible rows of a topic, oldest fence first
CREATE INDEX outbox_topic_visible_idx ON aion_wake.outbox (topic, visible_after);
-- the worker's rebuild: rows parked for capacity
CREATE INDEX outbox_parked_idx ON aion_wake.outbox (visible_after)
	WHERE parked_at IS NOT NULL;

CREATE TABLE aion_wake.dead_letters (
	dispatch_key  text PRIMARY KEY,
	topic         text NOT NULL,
	payload       jsonb NOT NULL,
	attempt       int NOT NULL,
	visible_after timestamptz NOT NULL,
	enqueued_at   timestamptz NOT NULL,
	last_error    text,
	lease_token   bigint,
	parked_at     timestamptz,
	reason        text,
	dead_at       timestamptz NOT NULL
);

SELECT pg_catalog.pg_extension_config_dump('aion_wake.outbox', '');
SELECT pg_catalog.pg_extension_config_dump('aion_wake.dead_letters', '');
SELECT pg_catalog.pg_extension_config_dump('aion_wake.lease_token_seq', '');

-- Row life cycle -----------------------------------------------------------

CREATE FUNCTION aion_wake.enqueue(dispatch_key text, payload jsonb DEFAULT '{}',
								  topic text DEFAULT 'default',
								  delay interval DEFAULT '0')
RETURNS boolean
AS 'MODULE_PATHNAME', 'aw_enqueue'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION aion_wake.claim(topic text DEFAULT 'default', max_rows int DEFAULT 1,
								lease interval DEFAULT '30s',
								wait interval DEFAULT '0')
RETURNS SETOF aion_wake.outbox
AS 'MODULE_PATHNAME', 'aw_claim'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE ROWS 1;

CREATE FUNCTION aion_wake.complete(dispatch_key text, lease_token bigint DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'aw_complete'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION aion_wake.fail(dispatch_key text, error text, backoff interval,
							   lease_token bigint DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'aw_fail'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION aion_wake.park(dispatch_key text, backoff interval DEFAULT '30s',
							   lease_token bigint DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'aw_park'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION aion_wake.dead_letter(dispatch_key text, reason text,
									  lease_token bigint DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'aw_dead_letter'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION aion_wake.pulse(topic text DEFAULT 'default', slots int DEFAULT 1)
RETURNS void
AS 'MODULE_PATHNAME', 'aw_pulse'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION aion_wake.reoffer(topic text DEFAULT 'default', max_rows int DEFAULT 1)
RETURNS bigint
AS 'MODULE_PATHNAME', 'aw_reoffer'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;

-- Shared-memory protocol ---------------------------------------------------

CREATE FUNCTION aion_wake.park_pending(dispatch_key text, attempt int DEFAULT 0,
									   topic text DEFAULT 'default')
RETURNS boolean
AS 'MODULE_PATHNAME', 'aw_park_pending'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION aion_wake.confirm(dispatch_key text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'aw_confirm'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION aion_wake.abandon(dispatch_key text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'aw_abandon'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION aion_wake.take_confirmed(topic text DEFAULT NULL, max_rows int DEFAULT NULL)
RETURNS TABLE (dispatch_key text, attempt int)
AS 'MODULE_PATHNAME', 'aw_take_confirmed'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;

-- Views --------------------------------------------------------------------

CREATE FUNCTION aion_wake.status_internal(
	OUT worker_pid int, OUT worker_database name, OUT served boolean,
	OUT listening boolean, OUT listen_error text, OUT capacity int,
	OUT parked_pending bigint, OUT parked_confirmed bigint, OUT waiters int,
	OUT pulses_received bigint, OUT slots_received bigint,
	OUT rows_reoffered bigint, OUT wakes_deferred bigint, OUT bad_pulses bigint,
	OUT set_full bigint, OUT fences_expired bigint, OUT unfenced_expired bigint,
	OUT credits_used bigint, OUT slots_returned bigint,
	OUT last_pulse_at timestamptz, OUT started_at timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'aw_status'
LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE VIEW aion_wake.status AS SELECT * FROM aion_wake.status_internal();

CREATE FUNCTION aion_wake.parked_internal(
	OUT dispatch_key text, OUT topic text, OUT attempt int, OUT state text,
	OUT woken boolean, OUT parked_at timestamptz, OUT fence timestamptz,
	OUT owner_pid int)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'aw_parked'
LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE VIEW aion_wake.parked AS SELECT * FROM aion_wake.parked_internal();

CREATE FUNCTION aion_wake.topics_internal(
	OUT topic text, OUT parked bigint, OUT unspent_slots bigint,
	OUT credit bigint, OUT waiters int, OUT pulses bigint, OUT reoffered bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'aw_topics_view'
LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE VIEW aion_wake.topics AS SELECT * FROM aion_wake.topics_internal();

-- Privileges ---------------------------------------------------------------
-- Nothing is usable by PUBLIC but the status view; README shows the GRANTs
-- an application role needs.

REVOKE ALL ON ALL TABLES IN SCHEMA aion_wake FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA aion_wake FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA aion_wake FROM PUBLIC;
GRANT USAGE ON SCHEMA aion_wake TO PUBLIC;
GRANT EXECUTE ON FUNCTION aion_wake.status_internal() TO PUBLIC;
GRANT SELECT ON aion_wake.status TO PUBLIC;
