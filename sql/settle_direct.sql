--
-- settle_direct: complete_many deletes the rows it settles without the
-- executor (src/settle_direct.c), but only where the statement's DELETE
-- would do nothing else; elsewhere it runs the statement.  Each case
-- below comes out differently if the delete without the executor runs
-- where it must not: a trigger fires, a foreign key cascades, a child
-- table's row is settled, row security hides a row, a role without
-- DELETE is refused.  Where it runs, it settles exactly the pairs whose
-- row carries the token, and sees what its transaction did before it.
--

CREATE TABLE sd_tok (dispatch_key text PRIMARY KEY, lease_token bigint);
-- enqueue keys in topic sd and lease them, keeping their tokens
CREATE FUNCTION sd_lease(keys text[]) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
	PERFORM aion_wake.enqueue(k, '{}', 'sd') FROM unnest(keys) k;
	INSERT INTO sd_tok SELECT dispatch_key, lease_token
	  FROM aion_wake.claim('sd', cardinality(keys), '1 hour');
	RETURN cardinality(keys);
END $$;
-- the tokens of keys, in their order
CREATE FUNCTION sd_tokens(keys text[]) RETURNS bigint[] LANGUAGE sql AS $$
	SELECT array_agg(t.lease_token ORDER BY k.n)
	  FROM unnest(keys) WITH ORDINALITY AS k(key, n) JOIN sd_tok t ON t.dispatch_key = k.key
$$;

-- a stale token and a missing key settle nothing; the rest are settled
SELECT sd_lease(ARRAY['sd1', 'sd2', 'sd3']);
SELECT aion_wake.complete_many(ARRAY['sd1', 'sd2', 'sd9'],
	   sd_tokens(ARRAY['sd1', 'sd2']) || ARRAY[0::bigint]) AS settled;
SELECT aion_wake.complete_many(ARRAY['sd3'], ARRAY[(sd_tokens(ARRAY['sd3']))[1] + 1]) AS stale;
SELECT dispatch_key FROM aion_wake.outbox WHERE topic = 'sd';
SELECT aion_wake.complete_many(ARRAY['sd3'], sd_tokens(ARRAY['sd3'])) AS settled;

-- a row leased earlier in the same transaction is settled, and a second
-- settle of it in that transaction finds it gone
BEGIN;
SELECT sd_lease(ARRAY['sd4']);
SELECT aion_wake.complete_many(ARRAY['sd4'], sd_tokens(ARRAY['sd4'])) AS settled;
SELECT aion_wake.complete_many(ARRAY['sd4'], sd_tokens(ARRAY['sd4'])) AS again;
COMMIT;

-- a trigger on the outbox fires for each row deleted
CREATE TABLE sd_log (key text);
CREATE FUNCTION sd_log_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO sd_log VALUES (OLD.dispatch_key);
	RETURN OLD;
END $$;
CREATE TRIGGER sd_log AFTER DELETE ON aion_wake.outbox
	FOR EACH ROW EXECUTE FUNCTION sd_log_delete();
SELECT sd_lease(ARRAY['sd5', 'sd6']);
SELECT aion_wake.complete_many(ARRAY['sd5', 'sd6'], sd_tokens(ARRAY['sd5', 'sd6'])) AS settled;
SELECT key FROM sd_log ORDER BY 1;
DROP TRIGGER sd_log ON aion_wake.outbox;

-- a foreign key that refers to the outbox cascades
CREATE TABLE sd_attachment (dispatch_key text REFERENCES aion_wake.outbox ON DELETE CASCADE);
SELECT sd_lease(ARRAY['sd7']);
INSERT INTO sd_attachment VALUES ('sd7');
SELECT aion_wake.complete_many(ARRAY['sd7'], sd_tokens(ARRAY['sd7'])) AS settled;
SELECT count(*) AS attachments_left FROM sd_attachment;
DROP TABLE sd_attachment;

-- a role: without DELETE on the outbox it is refused and nothing goes;
-- under row security it settles only the rows its policy shows
CREATE ROLE sd_app;
GRANT USAGE ON SCHEMA aion_wake TO sd_app;
GRANT SELECT ON aion_wake.outbox, aion_wake.limits TO sd_app;
GRANT SELECT ON sd_tok TO sd_app;
GRANT EXECUTE ON FUNCTION aion_wake.complete_many(text[], bigint[]) TO sd_app;
SELECT sd_lease(ARRAY['sd8']);
SET ROLE sd_app;
SELECT err($$SELECT aion_wake.complete_many(ARRAY['sd8'], sd_tokens(ARRAY['sd8']))$$);
RESET ROLE;
SELECT count(*) AS sd8_left FROM aion_wake.outbox WHERE dispatch_key = 'sd8';
GRANT DELETE ON aion_wake.outbox TO sd_app;
ALTER TABLE aion_wake.outbox ENABLE ROW LEVEL SECURITY;
CREATE POLICY sd_shown ON aion_wake.outbox USING (dispatch_key <> 'sd8');
SET ROLE sd_app;
SELECT aion_wake.complete_many(ARRAY['sd8'], sd_tokens(ARRAY['sd8'])) AS hidden_settled;
RESET ROLE;
DROP POLICY sd_shown ON aion_wake.outbox;
ALTER TABLE aion_wake.outbox DISABLE ROW LEVEL SECURITY;
SET ROLE sd_app;
SELECT aion_wake.complete_many(ARRAY['sd8'], sd_tokens(ARRAY['sd8'])) AS settled;
RESET ROLE;

-- a deferrable primary key: inside a transaction a key may have two
-- rows, and the statement settles both (so the commit finds no duplicate)
BEGIN;
ALTER TABLE aion_wake.outbox DROP CONSTRAINT outbox_pkey,
	ADD PRIMARY KEY (dispatch_key) DEFERRABLE INITIALLY DEFERRED;
INSERT INTO aion_wake.outbox (dispatch_key, topic, lease_token)
	VALUES ('sdd', 'sd', 777), ('sdd', 'sd', 777);
SELECT aion_wake.complete_many(ARRAY['sdd'], ARRAY[777::bigint]) AS both_settled;
SET CONSTRAINTS ALL IMMEDIATE;
ROLLBACK;

-- a collation that is not deterministic on dispatch_key: a key of other
-- bytes finds the row, and the settle refuses it, as the statement does
BEGIN;
CREATE COLLATION sd_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
ALTER TABLE aion_wake.outbox ALTER COLUMN dispatch_key TYPE text COLLATE sd_ci;
INSERT INTO aion_wake.outbox (dispatch_key, topic, lease_token) VALUES ('Sdn', 'sd', 778);
SELECT err($$SELECT aion_wake.complete_many(ARRAY['SDN'], ARRAY[778::bigint])$$);
SELECT aion_wake.complete_many(ARRAY['Sdn'], ARRAY[778::bigint]) AS same_bytes_settled;
ROLLBACK;

-- a table that inherits from the outbox: DELETE FROM the outbox reaches
-- its rows too.  Last: the outbox keeps relhassubclass set after the
-- child is dropped (until a vacuum), so every settle after this one would
-- run the statement whatever the case.
CREATE TABLE sd_child () INHERITS (aion_wake.outbox);
INSERT INTO sd_child (dispatch_key, topic, lease_token) VALUES ('sdc', 'sd', 4242);
SELECT aion_wake.complete_many(ARRAY['sdc'], ARRAY[4242::bigint]) AS child_settled;
SELECT count(*) AS child_rows FROM sd_child;
DROP TABLE sd_child;

DROP OWNED BY sd_app;
DROP ROLE sd_app;
DROP TABLE sd_log, sd_tok;
DROP FUNCTION sd_log_delete(), sd_lease(text[]), sd_tokens(text[]);
SELECT count(*) AS left_over FROM aion_wake.outbox WHERE topic = 'sd';
