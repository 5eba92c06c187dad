package api

// Data routes read after their admission, not alongside it: the reads
// benchmark (make bench, one run each on the shared 2-core machine) gave
// the sequential order the higher ratio to bare Fiber on snapshot (0.23 vs
// 0.19) and the /events page (0.28 vs 0.25), the same on the event read
// (0.26 vs 0.25). A read started in a goroutine of its own, with the store
// step held until the admission came back, cost more CPU (a goroutine and
// a gate per request) than the overlap saved on a saturated machine. The
// order also keeps a refused request from costing Redis anything but its
// limit check.

// readFailed is the answer to a read error the route does not answer
// itself (cache.ErrUnavailable, mostly): the data cannot be read (503).
func readFailed(err error) error {
	return &Error{Kind: KindUnavailable, Message: "the data cannot be read right now; try again", Err: err}
}
