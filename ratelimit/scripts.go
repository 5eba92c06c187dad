package ratelimit

import "github.com/redis/go-redis/v9"

// The limits are Lua scripts, each on one key or on two keys sharing a
// hash tag, so each decision is atomic and runs on Redis Cluster. Their clock
// is Redis (TIME, key expiry), never a node's: every node agrees on when a
// window starts and ends.

// windowScript takes places in one account's fixed window: ARGV[3] for
// requests, as that many calls one after the other would (the first ones
// while the window has room; the rest refused and not counted), then up to
// ARGV[4] more for a lease (lease.go), which the node hands out itself. A
// place is a position in the window, 0 … limit-1; a request's
// RateLimit-Remaining is limit-1-position, so every accepted request of a
// window has its own. Positions given back (refundScript: a lease that ran
// out, a request from a blocked address) are holes in the sorted set
// KEYS[2] and are taken again first, lowest first. Windows are aligned to
// multiples of the window length on the Redis clock, so every node agrees on
// when a window starts; the keys expire when their window ends.
//
// A lease is granted only from what is left above ARGV[5] (the reserve),
// so the last places of a window go to requests one by one, and it ends
// ARGV[6] ms after it is granted — or ARGV[7] ms (a long lease, lease.go)
// when ARGV[7] is above 0 and at least ARGV[8] places stay free after the
// grant: field le holds the latest end. When
// requests are refused while a lease may still be out (le not passed), the
// answer says how long until it ends: its unused places are about to come
// back, and the caller asks again then rather than refuse a request the
// window still has room for.
//
// KEYS[1] the account's window (a hash: s = window start in ms, n = next
// new position, le = end of the latest lease in ms); KEYS[2] its holes.
// ARGV[1] limit; ARGV[2] window in ms; ARGV[3] requests; ARGV[4] lease
// wanted; ARGV[5] reserve; ARGV[6] lease length in ms; ARGV[7] long lease
// length in ms (0: none); ARGV[8] places a long lease leaves free.
// Returns {accepted, leased, ms until the window ends, window start in ms,
// ms until the latest lease ends when some were refused (else 0),
// positions..., the lease's length in ms (0: none)}: the accepted requests'
// positions in order, then the lease's. The window start is what a refund
// names.
var windowScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[1])
local w = tonumber(ARGV[2])
local k = tonumber(ARGV[3])
local want = tonumber(ARGV[4])
local reserve = tonumber(ARGV[5])
local ttl = tonumber(ARGV[6])
local longttl = tonumber(ARGV[7])
local longfree = tonumber(ARGV[8])
local start = now - (now % w)
local cur = redis.call('HMGET', KEYS[1], 's', 'n', 'le')
local n, le, holes = 0, 0, 0
if tonumber(cur[1]) == start then
  n = tonumber(cur[2])
  le = tonumber(cur[3]) or 0
  holes = redis.call('ZCARD', KEYS[2])
elseif k + want > 0 then
  redis.call('DEL', KEYS[2])
end
local free = limit - n + holes
local a = math.max(0, math.min(k, free))
local g = 0
if want > 0 then g = math.max(0, math.min(want, free - a - reserve)) end
local out = {a, g, start + w - now, start, 0}
local granted = 0
local need = a + g
if need > 0 then
  if holes > 0 then
    local h = redis.call('ZPOPMIN', KEYS[2], need)
    for i = 2, #h, 2 do
      out[#out + 1] = tonumber(h[i])
      need = need - 1
    end
  end
  for p = n, n + need - 1 do out[#out + 1] = p end
  n = n + need
  if g > 0 then
    granted = ttl
    if longttl > 0 and free - a - g >= longfree then granted = longttl end
    le = math.max(le, now + granted)
  end
  redis.call('HSET', KEYS[1], 's', start, 'n', n, 'le', le)
  redis.call('PEXPIREAT', KEYS[1], start + w)
end
if a < k and le > now then out[5] = le - now end
out[#out + 1] = granted
return out
`)

// refundScript gives positions back to their window while it is the
// current one, as holes the next places are taken from: a refund that
// arrives after its window ended must not give the next window places.
//
// KEYS[1] the account's window; KEYS[2] its holes. ARGV[1] the window start
// (windowScript's 4th answer); ARGV[2] the window in ms; ARGV[3...] the
// positions.
var refundScript = redis.NewScript(`
local start = tonumber(ARGV[1])
if tonumber(redis.call('HGET', KEYS[1], 's')) == start and #ARGV > 2 then
  local args = {}
  for i = 3, #ARGV do
    args[#args + 1] = ARGV[i]
    args[#args + 1] = ARGV[i]
  end
  redis.call('ZADD', KEYS[2], unpack(args))
  redis.call('PEXPIREAT', KEYS[2], start + tonumber(ARGV[2]))
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
// The first failure of a window is published on the channel ARGV[3] (when
// set) as "<ms left> <address>": every node then checks that address on each
// request until the window ends (suspects.go), and no other.
//
// KEYS[1] the address's counter; KEYS[2] its block marker; ARGV[1] window in
// ms; ARGV[2] the limit; ARGV[3] the suspects channel; ARGV[4] the address.
// Returns {blocked (0|1), ms left}: of the block when blocked, else {0, ms
// left of the failure window, the failures counted}.
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
if n == 1 and ARGV[3] ~= '' then redis.call('PUBLISH', ARGV[3], ttl .. ' ' .. ARGV[4]) end
if n >= tonumber(ARGV[2]) then redis.call('SET', KEYS[2], '1', 'PX', ttl) end
return {0, ttl, n}
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
