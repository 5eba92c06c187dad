-- 003: small named state that ingest workers share, such as how far the
-- retention sweep has come.
CREATE TABLE ingest_state (
    name       text PRIMARY KEY,
    at         timestamptz NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
