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
