-- protocol (a): one park_pending + confirm pair, a fresh key per transaction
-- (two round trips, like select1x2.sql)
\set k random(1, 1000000000)
SELECT aion_wake.park_pending('b:' || :client_id || ':' || :k, 0, 'pair');
SELECT aion_wake.confirm('b:' || :client_id || ':' || :k);
