-- reference for pair.sql: two statements of the same shape (parameters, key
-- built by concatenation, a function call) that do not touch aion_wake;
-- separates what aion_wake costs from what such a statement costs anyway
\set k random(1, 1000000000)
SELECT length('b:' || :client_id || ':' || :k) > 0;
SELECT length('b:' || :client_id || ':' || :k) > 0;
