package api

// The credentials version poll: the safety net under the key notices.

import (
	"context"
	"time"
)

// credentialsVersioner is a Credentials source that can tell when any key or
// account record changed (store.Store can).
type credentialsVersioner interface {
	CredentialsVersion(ctx context.Context) (int64, error)
}

// credentialsPoll is how often a node checks the credentials version. With
// the notice lost, a revocation or withdrawal still takes effect within it
// (plus one lookup).
const credentialsPoll = 250 * time.Millisecond

// watchCredentials drops the key cache whenever the credentials version
// moves, in the background until ctx is done: the safety net under the
// NATS notices, so that the contract's 1 s holds even when a notice is lost
// or the node is cut off from NATS. A Credentials source that cannot tell
// its version is not watched.
func (n *notices) watchCredentials(ctx context.Context) {
	if v, ok := n.keys.src.(credentialsVersioner); ok {
		go n.pollCredentials(ctx, v)
	}
}

func (n *notices) pollCredentials(ctx context.Context, v credentialsVersioner) {
	t := time.NewTicker(credentialsPoll)
	defer t.Stop()
	for {
		qctx, cancel := context.WithTimeout(ctx, credentialsPoll)
		cur, err := v.CredentialsVersion(qctx)
		cancel()
		if err == nil {
			n.keys.observeVersion(cur)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
