-- 007: match metadata per venue link on events and markets (compact JSON,
-- NULL: the matcher sent none).
--
-- Placeholder on the candles branch: the match metadata branch owns this
-- migration and its file replaces this one when both are merged. Candles
-- (008) read markets.matches to know which venues count and which are
-- inverted, so the column must exist before 008.
ALTER TABLE events ADD COLUMN matches json;
ALTER TABLE markets ADD COLUMN matches json;
