package batch

import (
	"slices"
	"testing"
	"time"
)

func TestCollectTakesWhatWaits(t *testing.T) {
	ch := make(chan int, 8)
	for i := range 5 {
		ch <- i
	}
	var got []int
	add := func(v int) bool { got = append(got, v); return len(got) < 3 }
	if !Collect(nil, ch, add) {
		t.Fatal("Collect: false with values waiting")
	}
	if want := []int{0, 1, 2}; !slices.Equal(got, want) {
		t.Fatalf("first batch: got %v, want %v (in order, up to the room add reports)", got, want)
	}
	got = got[:0]
	if !Collect(nil, ch, add) {
		t.Fatal("Collect: false with values waiting")
	}
	if want := []int{3, 4}; !slices.Equal(got, want) {
		t.Fatalf("second batch: got %v, want %v (no wait for a third)", got, want)
	}
}

func TestCollectWaitsForTheFirst(t *testing.T) {
	ch := make(chan int)
	go func() {
		time.Sleep(10 * time.Millisecond)
		ch <- 7
	}()
	var got []int
	if !Collect(nil, ch, func(v int) bool { got = append(got, v); return true }) || !slices.Equal(got, []int{7}) {
		t.Fatalf("got %v, want [7]", got)
	}
}

func TestCollectStops(t *testing.T) {
	add := func(int) bool { t.Error("add called"); return true }
	done := make(chan struct{})
	close(done)
	if Collect(done, make(chan int), add) {
		t.Error("Collect after done: true, want false")
	}
	ch := make(chan int)
	close(ch)
	if Collect(nil, ch, add) {
		t.Error("Collect on a closed channel: true, want false")
	}
	// A channel closed after the first value ends the batch, not the call.
	ch = make(chan int, 2)
	ch <- 1
	close(ch)
	n := 0
	if !Collect(nil, ch, func(int) bool { n++; return true }) || n != 1 {
		t.Errorf("Collect then close: %d values, want 1", n)
	}
}
