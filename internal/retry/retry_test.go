package retry

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestBackoffDoublesToMax(t *testing.T) {
	b := Backoff{First: 250 * time.Millisecond, Max: 2 * time.Second}
	if b.Retrying() {
		t.Error("Retrying before any wait: got true, want false")
	}
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 2 * time.Second}
	for i, w := range want {
		if got := b.Next(); got != w {
			t.Errorf("wait %d: got %v, want %v", i, got, w)
		}
	}
	if !b.Retrying() {
		t.Error("Retrying after waits: got false, want true")
	}
	b.Reset()
	if got, want := b.Next(), 250*time.Millisecond; got != want {
		t.Errorf("after Reset: got %v, want %v", got, want)
	}
}

func TestBackoffWaitEndsWithContext(t *testing.T) {
	b := Backoff{First: time.Hour, Max: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := b.Wait(ctx); !errors.Is(got, context.Canceled) {
		t.Errorf("Wait on an ended context: got %v, want context.Canceled", got)
	}
	b = Backoff{First: time.Millisecond, Max: time.Millisecond}
	if got := b.Wait(context.Background()); got != nil {
		t.Errorf("Wait: got %v, want nil", got)
	}
}
