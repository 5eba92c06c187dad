package cache

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/store"
)

// The /events filters on match metadata (min_confidence, relation): how a
// listing page honours them from Redis.
//
// A confidence is a number, not a value a listing set can be cut by, so
// the filters are not sets of their own. Beside each listed event whose
// every venue link has metadata, {i}:m holds what the filters ask of its
// links (linksField): the least confidence and the relation they all share.
// A filtered page walks the filter's other set (category, venue,
// min_venues) from the cursor in one script, skipping the events that fail,
// and examines at most ReaderConfig.FilterScan of them: a filter that keeps
// few events makes pages that hold fewer than asked for, down to none,
// with a cursor where the walk stopped (Page.Resume), rather than a script
// that holds Redis for a scan of the whole set. Unfiltered pages never run
// this script and never read {i}:m: their read is the one they always had.

// listingLayout is the value of the completion marker ({i}:ok) a rebuild
// leaves: "2" since the listing holds {i}:m. A listing marked whole by an
// older release ("1") lacks {i}:m: filtered pages read the store until a
// rebuild (EnsureComplete runs one) has written it.
const listingLayout = "2"

// linksField is an event's {i}:m value: "<least confidence> <relation>",
// the relation "-" when the links' relations differ; "" (no field) when a
// link has no metadata, which passes no active filter. The confidence is
// written in the shortest form that reads back as the same float64, in Lua
// as in Go, so the script compares exactly what MatchFilter.Passes does.
func linksField(l store.Links) string {
	if !l.Complete {
		return ""
	}
	rel := l.Relation
	if rel == "" {
		rel = "-"
	}
	return strconv.FormatFloat(l.MinConfidence, 'g', -1, 64) + " " + rel
}

// matchKey names an active match filter in node memory's page keys; "" for
// none.
func matchKey(f store.MatchFilter) string {
	if !f.Active() {
		return ""
	}
	return strconv.FormatFloat(f.MinConfidence, 'g', -1, 64) + " " + f.Relation
}

// listFiltered reads one filtered page, in one script on the {i} slot.
// KEYS: the set, {i}:s, {i}:ok, {i}:m. ARGV: the ZRANGE BYLEX start ("-" or
// "(<id>"), the count, the least confidence, the relation ("" any), the
// most events to examine, the listing layout. Returns {0} when the listing
// is not whole in this layout, else {1, resume, id, summary, ...}: resume
// is the last id examined when the bound stopped the walk before the page
// was full or the set ended, else "". The set is read in chunks (at most
// 1000, within unpack's limits) sized to what the page still lacks.
var listFiltered = redis.NewScript(`
if redis.call('GET', KEYS[3]) ~= ARGV[6] then return {0} end
local want, least, rel, left = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
local start, ids, last, done = ARGV[1], {}, '', false
while not done and #ids < want and left > 0 do
  local n = math.min(left, math.max(2 * (want - #ids), 64), 1000)
  local chunk = redis.call('ZRANGE', KEYS[1], start, '+', 'BYLEX', 'LIMIT', 0, n)
  if #chunk < n then done = true end
  if #chunk > 0 then
    local links = redis.call('HMGET', KEYS[4], unpack(chunk))
    for i = 1, #chunk do
      last, left = chunk[i], left - 1
      local l = links[i]
      local sp = l and string.find(l, ' ', 1, true)
      local c = sp and tonumber(string.sub(l, 1, sp - 1))
      if c and c >= least and (rel == '' or string.sub(l, sp + 1) == rel) then
        ids[#ids + 1] = chunk[i]
        if #ids == want then break end
      end
    end
    start = '(' .. last
  end
end
local resume = ''
if not done and #ids < want then resume = last end
local out = {1, resume}
if #ids == 0 then return out end
local sums = redis.call('HMGET', KEYS[2], unpack(ids))
for i, id in ipairs(ids) do
  out[#out + 1] = id
  out[#out + 1] = sums[i] or ''
end
return out
`)

// filteredArgs are listFiltered's keys and arguments.
func (c *Cache) filteredArgs(set string, f store.MatchFilter, after string, count, scan int) ([]string, []any) {
	start := "-"
	if after != "" {
		start = "(" + after
	}
	return []string{c.SetKey(set), c.listingKey("s"), c.listingKey("ok"), c.listingKey("m")},
		[]any{start, count, strconv.FormatFloat(f.MinConfidence, 'g', -1, 64), f.Relation, scan, listingLayout}
}

// QueueFilteredPage queues the read of up to count events of a set with ids
// above after (bytewise), ascending, that pass an active match filter,
// examining at most scan of them (see listFiltered).
func (c *Cache) QueueFilteredPage(p redis.Pipeliner, set string, f store.MatchFilter, after string, count, scan int) *redis.Cmd {
	keys, args := c.filteredArgs(set, f, after, count, scan)
	return listFiltered.EvalSha(context.Background(), p, keys, args...)
}

// ParseFilteredPage reads a queued filtered page: its ids and summaries as
// ParseListPage's, and where the next page starts when the scan bound
// stopped the walk (resume; "" when the page is full or the set ended).
// When the script was lost (NOSCRIPT), it runs it again directly.
func (c *Cache) ParseFilteredPage(ctx context.Context, cmd *redis.Cmd, set string, f store.MatchFilter, after string, count, scan int) (ids []string, summaries [][]byte, resume string, err error) {
	vals, err := cmd.Slice()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		keys, args := c.filteredArgs(set, f, after, count, scan)
		vals, err = listFiltered.Run(ctx, c.rdb, keys, args...).Slice()
	}
	if err != nil {
		return nil, nil, "", fmt.Errorf("cache: list %s filtered: %w", set, err)
	}
	if len(vals) < 2 || vals[0] != int64(1) {
		return nil, nil, "", ErrListingIncomplete
	}
	resume, _ = vals[1].(string)
	ids, summaries = pagePairs(vals[2:])
	return ids, summaries, resume, nil
}

// pagePairs reads a page script's id, summary pairs; an empty summary (one
// a rebuild pruned at that moment) is nil.
func pagePairs(vals []any) (ids []string, summaries [][]byte) {
	for i := 0; i+1 < len(vals); i += 2 {
		id, _ := vals[i].(string)
		var sum []byte
		if s, _ := vals[i+1].(string); s != "" {
			sum = []byte(s)
		}
		ids, summaries = append(ids, id), append(summaries, sum)
	}
	return ids, summaries
}
