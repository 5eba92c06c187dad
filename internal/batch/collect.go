// Package batch gathers queued work so that one round trip serves many
// callers: under load many requests share a batch, and a lone request goes
// out at once, never held back to wait for company.
//
// Collect is the gathering step alone (wait for one value, take what else is
// already waiting); a loop that owns its channel and its batch uses it
// directly. Queue runs senders over Collect for callers that wait for their
// item's answer and may stop waiting: an item is queued until a sender takes
// it or its caller abandons it, and exactly one of the two wins.
package batch

// Collect waits for a value on ch and hands it to add, then hands add each
// value already waiting on ch, without waiting for more, while add reports
// room for another. It returns false, having handed add nothing, when done
// is closed (or ch is closed) before a value arrives.
func Collect[T any](done <-chan struct{}, ch <-chan T, add func(T) bool) bool {
	var v T
	var ok bool
	select {
	case <-done:
		return false
	case v, ok = <-ch:
		if !ok {
			return false
		}
	}
	for more := add(v); more; {
		select {
		case v, ok = <-ch:
			if !ok {
				return true
			}
			more = add(v)
		default:
			return true
		}
	}
	return true
}
