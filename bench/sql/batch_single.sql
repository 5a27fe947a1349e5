-- batch_many.sql the 1.1 way: 100 single-row complete() calls in one
-- statement, then a claim of 100 in another; the same pgbench options
\if :n = 0
SELECT coalesce(array_agg(dispatch_key), '{}') AS k, coalesce(array_agg(lease_token), '{}') AS t, count(*) AS n
  FROM aion_wake.claim('bench', 100, '1 min') \gset
\else
SELECT count(aion_wake.complete(k, t)) FROM unnest(:k::text[], :t::bigint[]) AS q(k, t);
SELECT coalesce(array_agg(dispatch_key), '{}') AS k, coalesce(array_agg(lease_token), '{}') AS t, count(*) AS n
  FROM aion_wake.claim('bench', 100, '1 min') \gset
\endif
