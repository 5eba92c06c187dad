-- 004: a version of all key and account records, bumped by every change to
-- them (a trigger, so no code path can forget). API nodes poll it and drop
-- their key cache when it moves: revocation and access withdrawal reach every
-- node within a second even when the NATS notice is lost.
CREATE TABLE credentials_version (
    id      integer PRIMARY KEY CHECK (id = 1),
    version bigint  NOT NULL
);
INSERT INTO credentials_version (id, version) VALUES (1, 0);

CREATE FUNCTION bump_credentials_version() RETURNS trigger AS $$
BEGIN
    UPDATE credentials_version SET version = version + 1 WHERE id = 1;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER accounts_credentials_version
    AFTER INSERT OR UPDATE OR DELETE ON accounts
    FOR EACH STATEMENT EXECUTE FUNCTION bump_credentials_version();

CREATE TRIGGER api_keys_credentials_version
    AFTER INSERT OR UPDATE OR DELETE ON api_keys
    FOR EACH STATEMENT EXECUTE FUNCTION bump_credentials_version();
