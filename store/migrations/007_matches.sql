-- 007: the matcher's metadata per venue (contract §3 "Match metadata"): how
-- sure it is that a venue's event or market is the same thing as ours.
--
-- A JSON object venue → {"relation", "confidence", "method"}, holding only the
-- venues the matcher sent metadata for; NULL when it sent none, which is what
-- every row written before this migration has. It is kept as the compact
-- JSON text ingest writes (json, not jsonb, as prices.quotes): every reader
-- decodes the whole object. A nullable column without a default is added
-- without rewriting the tables.
ALTER TABLE events ADD COLUMN matches json;
ALTER TABLE markets ADD COLUMN matches json;
