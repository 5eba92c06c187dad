package api

// The streams' key rechecks: a stream is authenticated once, at its
// upgrade, and closed when its key or account changes while it is open.

import (
	"context"
	"sync"
	"time"

	"github.com/marketdata/marketdata/api/stream"
	"github.com/marketdata/marketdata/store"
)

// recheck closes the streams whose key changed: after a key notice (an
// account or a key; both empty: every stream, after a flush of the key
// cache), it looks each affected key up again (the cache dropped it, so
// Postgres answers) and closes 4401 when the key is revoked, expired or
// gone, 4403 when the account's access was withdrawn. A lookup that fails
// (Postgres down) closes nothing: the cache's stale copy rules then, as for
// requests. Rechecks run in the background, one pass at a time: what is
// asked while one runs is merged into the next pass, named keys and
// accounts before the rest, with a few lookups in flight. The contract's
// 1 s holds while Postgres answers the pass within it.
func (st *streams) recheck(accountID, keyID string) {
	r := &st.rechecks
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case accountID == "" && keyID == "":
		r.all = true
	default:
		if r.accounts == nil {
			r.accounts, r.keys = map[string]bool{}, map[string]bool{}
		}
		if accountID != "" {
			r.accounts[accountID] = true
		}
		if keyID != "" {
			r.keys[keyID] = true
		}
	}
	if !r.running {
		r.running = true
		go st.runRechecks()
	}
}

// rechecks is what recheck was asked and has not checked yet.
type rechecks struct {
	mu             sync.Mutex
	running, all   bool
	accounts, keys map[string]bool
}

// recheckLookups bounds the key lookups of a pass in flight.
const recheckLookups = 8

func (st *streams) runRechecks() {
	r := &st.rechecks
	for {
		r.mu.Lock()
		all, accounts, keys := r.all, r.accounts, r.keys
		r.all, r.accounts, r.keys = false, nil, nil
		if !all && len(accounts) == 0 && len(keys) == 0 {
			r.running = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		var named, rest []*stream.Conn
		st.hub.Each(func(c *stream.Conn) {
			switch {
			case accounts[c.Info.AccountID] || keys[c.Info.KeyID]:
				named = append(named, c)
			case all:
				rest = append(rest, c)
			}
		})
		st.recheckPass(append(named, rest...))
	}
}

// recheckPass looks up each distinct key of conns once and closes the
// streams its verdict says.
func (st *streams) recheckPass(conns []*stream.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	byKey := map[string][]*stream.Conn{}
	var order []string
	for _, c := range conns {
		h := string(c.Info.KeyHash)
		if _, ok := byKey[h]; !ok {
			order = append(order, h)
		}
		byKey[h] = append(byKey[h], c)
	}
	sem := make(chan struct{}, recheckLookups)
	var wg sync.WaitGroup
	for _, h := range order {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			rec, err := st.keys.get(ctx, []byte(h))
			if err != nil {
				return
			}
			if code, reason := st.verdict(rec.credential()); code != 0 {
				for _, c := range byKey[h] {
					c.Close(code, reason)
				}
			}
		})
	}
	wg.Wait()
}

// verdict is the close a stream's key calls for now (0: none).
func (st *streams) verdict(cred *store.Credential) (int, string) {
	switch {
	case cred == nil:
		return stream.CloseRevoked, "the API key no longer exists"
	case cred.Key.RevokedAt != nil:
		return stream.CloseRevoked, "the API key was revoked"
	case !st.now().Before(cred.Key.ExpiresAt):
		return stream.CloseRevoked, "the API key expired"
	case !cred.Account.AccessGranted:
		return stream.CloseAccessRemoved, "the account's API access was withdrawn"
	}
	return 0, ""
}
