-- per-row cost of a batch hand-off, aion_wake 1.2: complete_many settles the B = 100
-- rows this client holds and takes 100 more, one statement and commit.  The
-- baseline is batch_by_hand.sql.  Run against a backlog in topic 'bench':
--   pgbench -n -M prepared -c C -j C -t N -D n=0 -D k='{}' -D t='{}' -f batch_many.sql
-- (the variables carry the held keys and tokens from one transaction to the
-- next; the first transaction of each client only claims)
\if :n = 0
SELECT coalesce(array_agg(dispatch_key), '{}') AS k, coalesce(array_agg(lease_token), '{}') AS t, count(*) AS n
  FROM aion_wake.claim('bench', 100, '1 min') \gset
\else
SELECT coalesce(array_agg(dispatch_key), '{}') AS k, coalesce(array_agg(lease_token), '{}') AS t, count(*) AS n
  FROM aion_wake.complete_many(:k, :t, next_rows => 100, lease => '1 min') \gset
\endif
