-- outbox (a), baseline: the bare fence UPDATE that park() replaces
\set k random(1, :nrows)
UPDATE aion_wake.outbox SET visible_after = clock_timestamp() + '1 hour', parked_at = clock_timestamp() WHERE dispatch_key = 'r' || :k;
