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

-- Rates (G10): three rated topics, fed and claimed by rated.sql.
--   q0  5 starts per 200 ms (raised to 8 mid-run by run.sh's controller)
--   q1  2 starts per 1 s, and a limit of 1: both must allow
--   q2  300 starts per 500 ms: more than 256 starts in a window, so that
--       the log groups its starts (aw_rate_window.h)
--   q3  4 starts per 3 s: a window longer than mode two's restarts take,
--       so that windows across them hold starts from both sides
-- stress_starts is the ledger of starts: one entry per row a claim or a
-- hand-off returned, at its server time, leased_until - lease (the claim's
-- clock), written by the script in the claim's own statement, and, when
-- its transaction rolled back (the start still counts), again after the
-- ROLLBACK from the rows the script kept (\gset).  stress_rates holds each
-- rate and the time from which it is in force (a raise: the clock just
-- before its commit, so a window is never judged by a rate older than
-- the one in force); stress_pauses the controller's pauses and resumes
-- (run.sh), each with the clock just before its commit (called) and just
-- after it (committed).
CREATE TABLE stress_starts (
	id			 bigserial PRIMARY KEY,
	topic		 text NOT NULL,
	dispatch_key text NOT NULL,
	lease_token	 bigint NOT NULL,
	start_at	 timestamptz NOT NULL,	-- leased_until - lease
	how			 text NOT NULL,			-- claim, claim_topics, handoff, handoff_many; _rolled_back
	logged_at	 timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX ON stress_starts (topic, start_at);
CREATE TABLE stress_rates (
	topic		 text NOT NULL,
	max_starts	 int NOT NULL,
	per			 interval NOT NULL,
	from_at		 timestamptz NOT NULL
);
CREATE TABLE stress_pauses (
	id			 bigserial PRIMARY KEY,
	topic		 text NOT NULL,
	until		 timestamptz,			-- null: a resume
	called		 timestamptz NOT NULL,	-- before the commit
	committed	 timestamptz			-- after it (null: not known)
);
SELECT aion_wake.set_rate('q0', 5, '200 ms');
SELECT aion_wake.set_rate('q1', 2, '1 s');
SELECT aion_wake.set_limit('q1', 1);
SELECT aion_wake.set_rate('q2', 300, '500 ms');
SELECT aion_wake.set_rate('q3', 4, '3 s');
INSERT INTO stress_rates SELECT topic, max_starts, per, '-infinity' FROM aion_wake.rates;
-- 200 rows in q0, 60 in q1, 1200 in q2 (its claims take up to 320 rows,
-- whose short leases expire and make them claimable again), 60 in q3; a
-- settle in rated.sql enqueues as many new rows as it removed
WITH k AS (SELECT nextval('stress_key_seq')::text AS k,
				  CASE WHEN g <= 200 THEN 'q0' WHEN g <= 260 THEN 'q1' WHEN g <= 1460 THEN 'q2'
					   ELSE 'q3' END AS t
			 FROM generate_series(1, 1520) g),
	 e AS (SELECT k FROM k WHERE aion_wake.enqueue(k, '{}', t))
INSERT INTO stress_log (dispatch_key, op) SELECT k, 'enqueue' FROM e;
-- the controller's pause (run.sh): pause the topic for ms milliseconds,
-- record it with the clock before the commit; run.sh then commits and
-- records the clock after it
CREATE FUNCTION stress_pause(t text, ms int) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	u timestamptz := clock_timestamp() + make_interval(secs => ms / 1000.0);
	id bigint;
BEGIN
	PERFORM aion_wake.pause(t, u);
	INSERT INTO stress_pauses (topic, until, called) VALUES (t, u, clock_timestamp()) RETURNING stress_pauses.id INTO id;
	RETURN id;
END
$$;
CREATE FUNCTION stress_resume(t text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	id bigint;
BEGIN
	PERFORM aion_wake.resume(t);
	INSERT INTO stress_pauses (topic, until, called) VALUES (t, NULL, clock_timestamp()) RETURNING stress_pauses.id INTO id;
	RETURN id;
END
$$;
