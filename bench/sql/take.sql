-- protocol (b): take 10 confirmed entries, then put 10 fresh ones back so the
-- set keeps its size.  pgbench -r times each statement: the take statement's
-- own latency is what is compared between a set of 1,000 and of 1,000,000;
-- SELECT 1 is a baseline measured in the same transactions.
\set k random(1, 1000000000)
SELECT 1;
SELECT count(*) FROM aion_wake.take_confirmed(topic => 'bench', max_rows => 10);
SELECT count(*) FILTER (WHERE aion_wake.park_pending(x, 0, 'bench') AND NOT aion_wake.confirm(x)) FROM (SELECT 'r:' || :client_id || ':' || :k || ':' || g AS x FROM generate_series(1, 10) g) s;
