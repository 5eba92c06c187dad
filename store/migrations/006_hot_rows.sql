-- 006: keep the rows every price update rewrites cheap to rewrite.
--
-- doc_revs.deps stamps what a market's price item derives from other than
-- its price: it takes a fresh value from doc_rev_seq whenever a batch changes
-- the market's row or its event (never for a price alone), under the
-- document's row lock. An ingest process keeps the market and event rows it
-- last read with that stamp and reads them again only when it changed, so a
-- price update reads no market or event row (see store/depscache.go).
ALTER TABLE doc_revs ADD COLUMN deps bigint NOT NULL DEFAULT 0;

-- Free space in every page, so that updating a row can put its new version in
-- the same page (a HOT update: no index entry, and the page prunes its own dead
-- versions even with autovacuum off). It applies to pages written from now on;
-- a table filled before this migration takes it after VACUUM FULL (docs/operations.md).
ALTER TABLE doc_revs SET (fillfactor = 70);
ALTER TABLE prices SET (fillfactor = 70);

-- The quotes are kept as the compact JSON text ingest writes (json, not
-- jsonb): nothing queries inside them, every reader decodes the whole set,
-- and the binary form was 330 of a price row's 400 bytes. This rewrites the
-- table, which also gives every page the fillfactor above.
ALTER TABLE prices ALTER COLUMN quotes TYPE json USING quotes::json;
