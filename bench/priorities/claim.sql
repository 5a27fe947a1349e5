-- one claim of a row of topic bench, rolled back so that every claim sees
-- the same table (the claim's latency is its statement, from pgbench -r)
BEGIN;
SELECT count(*) FROM aion_wake.claim('bench', 1, '1 hour');
ROLLBACK;
