-- outbox (b), candidate: claim one row for an hour
SELECT * FROM aion_wake.claim('bench', 1, '1 hour');
