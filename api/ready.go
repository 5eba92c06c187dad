package api

import (
	"errors"
)

// errSearchNotLoaded is Ready's answer until the first load succeeded.
var errSearchNotLoaded = errors.New("search index not loaded yet")

// Ready reports nil once the node holds what it needs in memory to answer
// correctly (the search index); until then the node must not be sent
// traffic. It never turns back: a loaded index is kept fresh by its resync.
func (s *Server) Ready() error {
	if s.search != nil && !s.search.Ready() {
		return errSearchNotLoaded
	}
	return nil
}
