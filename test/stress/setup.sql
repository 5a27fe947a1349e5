-- test/stress/setup.sql: the stress test's bookkeeping (run.sh loads it).
--
-- stress_log is the ledger the checker accounts with.  Two kinds of entry:
--   * row_* entries, written by a trigger on aion_wake.outbox for every row
--     that is inserted, updated or deleted, whoever does it (client backends
--     and the aion_wake worker).  The trigger runs while the row's lock is
--     held, so for one dispatch_key the order of ids is the order in which
--     the changes committed; a change that rolls back takes its entry with it.
--   * app entries (enqueue, complete, park, fail, dead_letter, in_set),
--     written by the pgbench scripts in the same transaction as the call,
--     only when the call returned true (in_set: the pending entries this
--     backend holds in the parked set right after its park() calls).
-- row_* entries carry the row's topic, so that the G8 check can count the
-- leases of each limited topic (l0, l1: limits set below) from the ledger.
-- stress_inflight holds samples of aion_wake.topics taken during the load
-- (sample.sql).
-- The trigger is AFTER ROW (not BEFORE) so that an enqueue() that hits ON
-- CONFLICT DO NOTHING logs nothing.

CREATE EXTENSION aion_wake;
-- probe.sql pulses from a second session while its park is pending
CREATE EXTENSION dblink;
CREATE TABLE stress_conf (dsn text NOT NULL);	-- filled by run.sh

CREATE SEQUENCE stress_key_seq;

CREATE TABLE stress_log (
	id			 bigserial PRIMARY KEY,
	xid			 xid8 NOT NULL DEFAULT pg_current_xact_id(),
	dispatch_key text NOT NULL,
	op			 text NOT NULL,
	lease_token	 bigint,
	fence		 timestamptz,	-- row_claim*/row_reoffer: the old fence; others: the new one
	new_fence	 timestamptz,
	attempt		 int,
	backend_type text,
	topic		 text,			-- row_* entries
	at			 timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX ON stress_log (dispatch_key, id);
CREATE INDEX ON stress_log (op);

-- the re-offers, as the brief names them
CREATE VIEW stress_reoffers AS
	SELECT id, dispatch_key, fence AS old_fence, new_fence, at, backend_type
	  FROM stress_log WHERE op = 'row_reoffer';

CREATE FUNCTION stress_track() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
	kind text;
BEGIN
	IF TG_OP = 'INSERT' THEN
		INSERT INTO public.stress_log (dispatch_key, op, fence, attempt, lease_token, topic)
		VALUES (NEW.dispatch_key, 'row_insert', NEW.visible_after, NEW.attempt, NEW.lease_token, NEW.topic);
		RETURN NULL;
	ELSIF TG_OP = 'DELETE' THEN
		INSERT INTO public.stress_log (dispatch_key, op, fence, attempt, lease_token, topic)
		VALUES (OLD.dispatch_key, 'row_delete', OLD.visible_after, OLD.attempt, OLD.lease_token, OLD.topic);
		RETURN NULL;
	END IF;

	-- UPDATE: what changed tells which function did it
	IF NEW.lease_token IS DISTINCT FROM OLD.lease_token THEN
		-- claim(): a fresh token, fence = lease; the old fence must have
		-- passed, or the row was parked and a claimer spent a pulse slot on
		-- it, taking it straight from its fence (row_claim_parked: a re-offer
		-- and a claim in one UPDATE)
		kind := CASE WHEN NEW.parked_at IS NOT NULL OR NEW.attempt <> OLD.attempt
					 THEN 'row_bad_claim'
					 WHEN OLD.visible_after <= pg_catalog.clock_timestamp()
					 THEN 'row_claim'
					 WHEN OLD.parked_at IS NOT NULL
					 THEN 'row_claim_parked'
					 ELSE 'row_bad_claim' END;
		INSERT INTO public.stress_log (dispatch_key, op, lease_token, fence, new_fence, attempt, topic)
		VALUES (NEW.dispatch_key, kind, NEW.lease_token, OLD.visible_after, NEW.visible_after, NEW.attempt,
				NEW.topic);
	ELSIF NEW.attempt IS DISTINCT FROM OLD.attempt THEN
		-- fail(): attempt + 1, parked_at cleared
		kind := CASE WHEN NEW.attempt <> OLD.attempt + 1 OR NEW.parked_at IS NOT NULL
					 THEN 'row_bad_fail' ELSE 'row_fail' END;
		INSERT INTO public.stress_log (dispatch_key, op, lease_token, fence, attempt, topic)
		VALUES (NEW.dispatch_key, kind, NEW.lease_token, NEW.visible_after, NEW.attempt, NEW.topic);
	ELSIF NEW.parked_at IS NOT NULL THEN
		-- park(): fence and parked_at written
		INSERT INTO public.stress_log (dispatch_key, op, lease_token, fence, attempt, topic)
		VALUES (NEW.dispatch_key, 'row_park', NEW.lease_token, NEW.visible_after, NEW.attempt, NEW.topic);
	ELSIF OLD.parked_at IS NOT NULL THEN
		-- a re-offer: parked_at cleared, attempt and lease untouched
		INSERT INTO public.stress_log (dispatch_key, op, lease_token, fence, new_fence, attempt, backend_type,
									   topic)
		VALUES (NEW.dispatch_key, 'row_reoffer', NEW.lease_token, OLD.visible_after, NEW.visible_after,
				NEW.attempt,
				(SELECT a.backend_type FROM pg_catalog.pg_stat_activity a
				  WHERE a.pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid()),
				NEW.topic);
	ELSE
		INSERT INTO public.stress_log (dispatch_key, op, lease_token, fence, new_fence, attempt, topic)
		VALUES (NEW.dispatch_key, 'row_other', NEW.lease_token, OLD.visible_after, NEW.visible_after, NEW.attempt,
				NEW.topic);
	END IF;
	RETURN NULL;
END
$$;

CREATE TRIGGER stress_track AFTER INSERT OR UPDATE OR DELETE ON aion_wake.outbox
	FOR EACH ROW EXECUTE FUNCTION stress_track();

-- Known capacity (G8): two limited topics, l0 at most 1 row leased at
-- once, l1 at most 3.  limited.sql claims from them (alone, together, and
-- with t2) and settles what it took; enqueue.sql feeds them.  The limits
-- stay as they are for the whole run, so the checker reads them from
-- aion_wake.limits.
SELECT aion_wake.set_limit('l0', 1);
SELECT aion_wake.set_limit('l1', 3);

-- samples of the limited topics' in_flight, taken during the load (sample.sql)
CREATE TABLE stress_inflight (
	at			  timestamptz NOT NULL DEFAULT clock_timestamp(),
	topic		  text NOT NULL,
	in_flight	  int,
	max_in_flight int
);

-- the keys are numbers: in pgbench a variable is substituted as written,
-- so numbers need no quoting.  300 rows to start with, and 40 in each
-- limited topic.
WITH k AS (SELECT nextval('stress_key_seq')::text AS k, g % 3 AS t
			 FROM generate_series(1, 300) g),
	 e AS (SELECT k FROM k WHERE aion_wake.enqueue(k, '{}', 't' || t))
INSERT INTO stress_log (dispatch_key, op) SELECT k, 'enqueue' FROM e;
WITH k AS (SELECT nextval('stress_key_seq')::text AS k, g % 2 AS t
			 FROM generate_series(1, 80) g),
	 e AS (SELECT k FROM k WHERE aion_wake.enqueue(k, '{}', 'l' || t))
INSERT INTO stress_log (dispatch_key, op) SELECT k, 'enqueue' FROM e;

-- The checker's only way to wait: poll a condition with short steps until it
-- holds or the deadline passes (each EXECUTE takes a fresh snapshot).
CREATE FUNCTION stress_wait(cond text, timeout interval) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
	deadline timestamptz := clock_timestamp() + timeout;
	ok boolean;
BEGIN
	LOOP
		EXECUTE 'SELECT (' || cond || ')' INTO ok;
		IF ok THEN
			RETURN true;
		END IF;
		IF clock_timestamp() >= deadline THEN
			RETURN false;
		END IF;
		PERFORM pg_sleep(0.01);
	END LOOP;
END
$$;
