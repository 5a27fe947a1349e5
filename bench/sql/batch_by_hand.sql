-- baseline of batch_many.sql, written by hand: DELETE the 100 rows held by key
-- and token and claim 100 more (FOR UPDATE SKIP LOCKED), one statement; the
-- same pgbench options
\if :n = 0
WITH c AS (SELECT dispatch_key FROM aion_wake.outbox WHERE topic = 'bench' AND visible_after <= clock_timestamp()
            ORDER BY visible_after LIMIT 100 FOR UPDATE SKIP LOCKED),
     u AS (UPDATE aion_wake.outbox o SET visible_after = clock_timestamp() + '1 min', leased_until = clock_timestamp() + '1 min',
                  lease_token = nextval('aion_wake.lease_token_seq'), parked_at = NULL
             FROM c WHERE o.dispatch_key = c.dispatch_key RETURNING o.dispatch_key, o.lease_token)
SELECT coalesce(array_agg(dispatch_key), '{}') AS k, coalesce(array_agg(lease_token), '{}') AS t, count(*) AS n FROM u \gset
\else
WITH d AS (DELETE FROM aion_wake.outbox o USING unnest(:k::text[], :t::bigint[]) AS q(k, t)
            WHERE o.dispatch_key = q.k AND o.lease_token = q.t RETURNING o.dispatch_key),
     c AS (SELECT dispatch_key FROM aion_wake.outbox WHERE topic = 'bench' AND visible_after <= clock_timestamp()
            ORDER BY visible_after LIMIT 100 FOR UPDATE SKIP LOCKED),
     u AS (UPDATE aion_wake.outbox o SET visible_after = clock_timestamp() + '1 min', leased_until = clock_timestamp() + '1 min',
                  lease_token = nextval('aion_wake.lease_token_seq'), parked_at = NULL
             FROM c WHERE o.dispatch_key = c.dispatch_key RETURNING o.dispatch_key, o.lease_token)
SELECT coalesce(array_agg(dispatch_key), '{}') AS k, coalesce(array_agg(lease_token), '{}') AS t, count(*) AS n
  FROM u WHERE (SELECT count(*) FROM d) >= 0 \gset
\endif
