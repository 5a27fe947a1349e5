--
-- claim_direct: a claim of one row looks first without the executor
-- (src/claim_direct.c), but only where the outbox's update would do
-- nothing else; elsewhere it runs its statement.  Each case below comes
-- out differently if the look without the executor runs where it must
-- not: a trigger fires, a CHECK constraint is checked, row security
-- hides rows, a role without UPDATE is refused.  Where it runs, it sees
-- what its transaction did before it, and a second claim in the same
-- transaction sees the first.
--

-- rows enqueued earlier in the transaction are claimed, one each, oldest
-- first, leased as the statement leases them
BEGIN;
SELECT aion_wake.enqueue('cd1', '{"n": 1}', 'cd');
SELECT aion_wake.enqueue('cd2', '{"n": 2}', 'cd');
SELECT dispatch_key, topic, payload, attempt, lease_token IS NOT NULL AS leased,
       parked_at IS NULL AS unparked, visible_after = leased_until AS fence_is_lease,
       visible_after > clock_timestamp() + interval '50 minutes' AS fence_ahead, priority
  FROM aion_wake.claim('cd', 1, '1 hour');
SELECT dispatch_key FROM aion_wake.claim('cd', 1, '1 hour');
SELECT count(*) AS third_claim FROM aion_wake.claim('cd', 1, '1 hour');
COMMIT;
SELECT dispatch_key, lease_token IS NOT NULL AS leased
  FROM aion_wake.outbox WHERE topic = 'cd' ORDER BY 1;
SELECT aion_wake.complete('cd1'), aion_wake.complete('cd2');

-- a rolled-back claim leaves the row as it was
SELECT aion_wake.enqueue('cd3', '{}', 'cd');
BEGIN;
SELECT dispatch_key FROM aion_wake.claim('cd');
ROLLBACK;
SELECT dispatch_key, lease_token IS NULL AS unleased, leased_until IS NULL AS no_lease
  FROM aion_wake.outbox WHERE topic = 'cd';

-- a trigger on the outbox fires for the claim's update
CREATE TABLE cd_log (key text, token bigint);
CREATE FUNCTION cd_log_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO cd_log VALUES (NEW.dispatch_key, NEW.lease_token);
	RETURN NEW;
END $$;
CREATE TRIGGER cd_log AFTER UPDATE ON aion_wake.outbox
	FOR EACH ROW EXECUTE FUNCTION cd_log_update();
SELECT dispatch_key FROM aion_wake.claim('cd');
SELECT key, token IS NOT NULL AS token FROM cd_log WHERE key LIKE 'cd%';
DROP TRIGGER cd_log ON aion_wake.outbox;
SELECT aion_wake.complete('cd3');

-- CHECK constraints: one on a column a claim writes is checked; so is one
-- not validated, whatever its columns; a validated one on columns a claim
-- leaves alone holds
SELECT aion_wake.enqueue('cd4', '{}', 'cd');
ALTER TABLE aion_wake.outbox ADD CONSTRAINT cd_no_lease CHECK (lease_token IS NULL) NOT VALID;
SELECT err($$SELECT * FROM aion_wake.claim('cd')$$);
ALTER TABLE aion_wake.outbox DROP CONSTRAINT cd_no_lease;
ALTER TABLE aion_wake.outbox ADD CONSTRAINT cd_no_attempt CHECK (attempt < 0) NOT VALID;
SELECT err($$SELECT * FROM aion_wake.claim('cd')$$);
ALTER TABLE aion_wake.outbox DROP CONSTRAINT cd_no_attempt;
CREATE FUNCTION cd_row_ok(o aion_wake.outbox) RETURNS bool IMMUTABLE LANGUAGE sql
	AS $$ SELECT NOT (o.topic = 'cd' AND o.lease_token IS NOT NULL) $$;
ALTER TABLE aion_wake.outbox ADD CONSTRAINT cd_whole_row CHECK (cd_row_ok(outbox));
SELECT err($$SELECT * FROM aion_wake.claim('cd')$$);
ALTER TABLE aion_wake.outbox DROP CONSTRAINT cd_whole_row;
DROP FUNCTION cd_row_ok(aion_wake.outbox);
ALTER TABLE aion_wake.outbox ADD CONSTRAINT cd_attempt CHECK (attempt >= 0);
SELECT dispatch_key FROM aion_wake.claim('cd');
ALTER TABLE aion_wake.outbox DROP CONSTRAINT cd_attempt;
SELECT aion_wake.complete('cd4');

-- the index rebuilt in another order: the claim still takes the highest
-- priority, then the oldest fence
SELECT aion_wake.enqueue('cd7', '{}', 'cd', priority => 1);
SELECT aion_wake.enqueue('cd8', '{}', 'cd', priority => 9);
SELECT aion_wake.enqueue('cd9', '{}', 'cd', priority => 9);
BEGIN;
DROP INDEX aion_wake.outbox_topic_priority_visible_idx;
CREATE INDEX outbox_topic_priority_visible_idx
	ON aion_wake.outbox (topic, priority, visible_after DESC);
SELECT dispatch_key, priority FROM aion_wake.claim('cd');
ROLLBACK;
SELECT dispatch_key, priority FROM aion_wake.claim('cd');
SELECT aion_wake.complete(k) FROM unnest(ARRAY['cd7', 'cd8', 'cd9']) k;

-- a role: without UPDATE on the outbox it is refused as the statement
-- refuses it; with UPDATE on the columns a claim writes only, it claims;
-- under row security it sees only the rows its policy shows
CREATE ROLE cd_app;
GRANT USAGE ON SCHEMA aion_wake TO cd_app;
GRANT SELECT ON aion_wake.outbox, aion_wake.limits, aion_wake.rates, aion_wake.pauses TO cd_app;
GRANT USAGE ON SEQUENCE aion_wake.lease_token_seq TO cd_app;
GRANT EXECUTE ON FUNCTION aion_wake.claim(text, int, interval, interval) TO cd_app;
SELECT aion_wake.enqueue('cd5', '{}', 'cd');
SET ROLE cd_app;
SELECT err($$SELECT * FROM aion_wake.claim('cd')$$);
RESET ROLE;
GRANT UPDATE (visible_after, parked_at, leased_until, lease_token) ON aion_wake.outbox TO cd_app;
SET ROLE cd_app;
SELECT dispatch_key FROM aion_wake.claim('cd');
RESET ROLE;
SELECT aion_wake.complete('cd5');
GRANT UPDATE ON aion_wake.outbox TO cd_app;
SELECT aion_wake.enqueue('cd6', '{}', 'cd_hidden');
ALTER TABLE aion_wake.outbox ENABLE ROW LEVEL SECURITY;
CREATE POLICY cd_shown ON aion_wake.outbox USING (topic <> 'cd_hidden');
SET ROLE cd_app;
SELECT count(*) AS hidden_claimed FROM aion_wake.claim('cd_hidden');
RESET ROLE;
DROP POLICY cd_shown ON aion_wake.outbox;
ALTER TABLE aion_wake.outbox DISABLE ROW LEVEL SECURITY;
SET ROLE cd_app;
SELECT dispatch_key FROM aion_wake.claim('cd_hidden');
RESET ROLE;
SELECT aion_wake.complete('cd6');

DROP OWNED BY cd_app;
DROP ROLE cd_app;
DROP TABLE cd_log;
DROP FUNCTION cd_log_update();

-- a claim of several rows looks first at its highest priority, then walks
-- below it for the rest: the rows come back by priority, fence, key
SELECT count(aion_wake.enqueue(k, '{}', 'cdm', priority => p))
  FROM (VALUES ('cdm1', 3), ('cdm2', 3), ('cdm3', 0), ('cdm4', -1), ('cdm5', 3)) v(k, p);
UPDATE aion_wake.outbox SET visible_after = now() - interval '1 hour'
 WHERE dispatch_key IN ('cdm2', 'cdm5');
SELECT dispatch_key, priority FROM aion_wake.claim('cdm', 4);
SELECT dispatch_key, priority FROM aion_wake.claim('cdm', 4);
SELECT count(aion_wake.complete(dispatch_key, lease_token))
  FROM aion_wake.outbox WHERE topic = 'cdm';
-- a lease of 0 ends a microsecond after the claim's clock: no row twice,
-- whether the look takes them all or the walk the rest
SELECT count(aion_wake.enqueue(k, '{}', 'cdz', priority => p))
  FROM (VALUES ('cdz1', 0), ('cdz2', 0), ('cdz3', -1)) v(k, p);
SELECT dispatch_key FROM aion_wake.claim('cdz', 10, '0');
SELECT count(aion_wake.complete(dispatch_key, lease_token))
  FROM aion_wake.outbox WHERE topic = 'cdz';
