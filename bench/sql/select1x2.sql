-- baseline for pair.sql: two round trips that do nothing
SELECT 1;
SELECT 1;
