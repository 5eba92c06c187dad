package ratelimit

import "github.com/redis/go-redis/v9"

// The limits are Lua scripts, each on one key or on two keys sharing a
// hash tag, so each decision is atomic and runs on Redis Cluster. Their clock
// is Redis (TIME, key expiry), never a node's: every node agrees on when a
// window starts and ends.

// windowScript counts ARGV[3] requests of one account in its fixed window,
// as that many calls one after the other would: the first ones are accepted
// while the window has room, the rest refused (and not counted). Windows are
// aligned to multiples of the window length on the Redis clock, so every node
// agrees on when a window starts; the key expires when its window ends.
//
// KEYS[1] the account's key (a hash: s = window start in ms, n = count);
// ARGV[1] limit; ARGV[2] window in ms; ARGV[3] requests.
// Returns {accepted, count before them, ms until the window ends, window
// start in ms}. The window start is what a refund names (refundScript).
var windowScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[1])
local w = tonumber(ARGV[2])
local k = tonumber(ARGV[3])
local start = now - (now % w)
local cur = redis.call('HMGET', KEYS[1], 's', 'n')
local n = 0
if tonumber(cur[1]) == start then n = tonumber(cur[2]) end
local a = math.max(0, math.min(k, limit - n))
if a > 0 then
  redis.call('HSET', KEYS[1], 's', start, 'n', n + a)
  redis.call('PEXPIREAT', KEYS[1], start + w)
end
return {a, n, start + w - now, start}
`)

// refundScript takes back counted requests when their window is still the
// current one: a refund that arrives after its window ended must not take
// places from the next window.
//
// KEYS[1] the account's key; ARGV[1] the window start (windowScript's 4th
// answer); ARGV[2] how many.
var refundScript = redis.NewScript(`
if tonumber(redis.call('HGET', KEYS[1], 's')) == tonumber(ARGV[1]) then
  redis.call('HINCRBY', KEYS[1], 'n', -tonumber(ARGV[2]))
end
return 0
`)

// failOrBlockedScript is what a request refused for its key (401) does,
// atomically: when the address is already blocked, answer so without
// counting; else count one failed authentication. The failure window starts
// at the address's first failure. Once the count reaches the limit, a block
// marker lives until that window ends, so that the check every admission
// makes is one plain PTTL, not a script. Being one script, however many bad
// requests arrive at once on however many nodes, exactly `limit` of them are
// counted (401) and the rest are told the address is blocked (429).
//
// KEYS[1] the address's counter; KEYS[2] its block marker; ARGV[1] window in
// ms; ARGV[2] the limit.
// Returns {blocked (0|1), ms left}: of the block when blocked, else of the
// failure window.
var failOrBlockedScript = redis.NewScript(`
local b = redis.call('PTTL', KEYS[2])
if b > 0 then return {1, b} end
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
if n >= tonumber(ARGV[2]) then redis.call('SET', KEYS[2], '1', 'PX', ttl) end
return {0, ttl}
`)

// openStreamScript takes a slot for one stream of an account. The account's
// key is a sorted set of its open streams, each scored with the end of its
// lease in ms on the Redis clock; leases that ended are dropped first, so a
// killed node's streams stop counting once their leases end. A stream already
// in the set keeps its slot (a retried Open counts once).
//
// KEYS[1] the account's streams; ARGV[1] limit; ARGV[2] lease in ms; ARGV[3]
// the stream id.
// Returns {1, 0} when the stream has its slot, else {0, ms until the soonest
// lease of the account ends}.
var openStreamScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if not redis.call('ZSCORE', KEYS[1], ARGV[3]) and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, tonumber(first[2]) - now}
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, 0}
`)

// renewStreamsScript extends the leases of streams of one account that a
// node holds open, adding back those Redis lost (a flush, a restart, a
// failover to a replica that had not seen them): a stream open on a node
// counts, whatever Redis remembers. Added back without a limit check, they
// may put the account over its limit until some close; Opens are refused
// meanwhile.
//
// KEYS[1] the account's streams; ARGV[1] lease in ms; ARGV[2...] stream ids.
// Returns how many of them were missing (added back).
var renewStreamsScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local exp = now + tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local args = {}
for i = 2, #ARGV do
  args[#args + 1] = exp
  args[#args + 1] = ARGV[i]
end
local added = redis.call('ZADD', KEYS[1], unpack(args))
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return added
`)
