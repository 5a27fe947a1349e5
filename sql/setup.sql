--
-- setup: what the regress files share, made once before they run (the
-- Makefile's REGRESS list runs it first; every file runs in the same
-- database).
--
-- err(q): run the statement q and return 'no error', or the SQLSTATE and
-- message of the error it raised: an expected error as one line of output,
-- with its SQLSTATE.
CREATE OR REPLACE FUNCTION err(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE q;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

-- wait_reoffered(key): wait (10 ms steps, at most 60 s) until the worker
-- has re-offered the row key in its own time: unparked, and its entry gone
-- from the set.  For checks that must not read the row before the worker
-- has acted on it.
CREATE OR REPLACE PROCEDURE wait_reoffered(key text) LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1 .. 6000 LOOP
		EXIT WHEN EXISTS (SELECT FROM aion_wake.outbox
						   WHERE dispatch_key = key AND parked_at IS NULL)
			  AND NOT EXISTS (SELECT FROM aion_wake.parked WHERE dispatch_key = key);
		IF i = 6000 THEN
			RAISE EXCEPTION 'the worker did not re-offer % within 60 s', key;
		END IF;
		PERFORM pg_sleep(0.01);
	END LOOP;
END $$;
