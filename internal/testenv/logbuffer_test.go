package testenv

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestLogBuffer(t *testing.T) {
	var b LogBuffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 100 {
				fmt.Fprintf(&b, "line %d\n", i) //nolint:errcheck // LogBuffer.Write never fails
			}
		})
	}
	wg.Wait()
	if got, want := strings.Count(b.String(), "\n"), 800; got != want {
		t.Errorf("got %d lines, want %d", got, want)
	}
	if got, want := strings.Count(string(b.Take()), "\n"), 800; got != want {
		t.Errorf("Take: got %d lines, want %d", got, want)
	}
	if got := b.Take(); len(got) != 0 {
		t.Errorf("Take after Take: got %q, want nothing", got)
	}
	b.Write([]byte("x")) //nolint:errcheck // never fails
	if got, want := b.String(), "x"; got != want {
		t.Errorf("after Take and Write: got %q, want %q", got, want)
	}
}
