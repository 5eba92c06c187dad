-- 002: accounts, their API access, and API keys. A key's secret is never
-- stored: only an HMAC of it under MD_KEY_PEPPER, and its last four characters.

CREATE TABLE accounts (
    account_id        text COLLATE "C" PRIMARY KEY,
    name              text        NOT NULL,
    access_granted    boolean     NOT NULL DEFAULT false,
    access_changed_at timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
    key_id       text COLLATE "C" PRIMARY KEY,
    account_id   text COLLATE "C" NOT NULL REFERENCES accounts (account_id),
    secret_hash  bytea       NOT NULL UNIQUE,
    last4        text        NOT NULL,
    scopes       text[]      NOT NULL,
    -- normalised CIDRs; empty = any address
    ip_allowlist text[]      NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    revoked_at   timestamptz,
    CHECK (expires_at > created_at),
    CHECK (cardinality(ip_allowlist) <= 20)
);

CREATE INDEX api_keys_account_idx ON api_keys (account_id, key_id);
