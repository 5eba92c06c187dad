-- 005: requests per account, UTC day and route (contract §3 "Usage"). API
-- nodes count in memory and add their counts here every half second, one
-- batch per node (an upsert adding to count), so no request pays a write.
-- usage_flushes records each batch's id in the same transaction: a batch
-- retried after a commit whose outcome the node never heard is not added
-- twice. Rows older than 400 days (usage) or a day (usage_flushes) are
-- swept by the nodes.
CREATE TABLE usage (
    account_id text COLLATE "C" NOT NULL,
    day        date   NOT NULL,
    route      text COLLATE "C" NOT NULL,
    count      bigint NOT NULL CHECK (count >= 0),
    PRIMARY KEY (account_id, day, route)
) WITH (fillfactor = 70);
-- fillfactor: every flush (each node, every 500 ms) updates the day's row
-- of each account active on the node; room left on the page lets Postgres
-- update in place (HOT: count is in no index), without index writes.

CREATE INDEX usage_day_idx ON usage (day);

CREATE TABLE usage_flushes (
    flush_id   text PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX usage_flushes_applied_idx ON usage_flushes (applied_at);
