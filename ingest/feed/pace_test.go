package feed

import (
	"context"
	"testing"
	"time"
)

func TestPacerDelay(t *testing.T) {
	type call struct {
		at   time.Duration // since the pacer's start
		want time.Duration
	}
	tests := []struct {
		name  string
		rate  float64
		calls []call
	}{
		{"unpaced", 0, []call{{0, 0}, {0, 0}, {0, 0}}},
		{"one per 100ms", 10, []call{{0, 0}, {0, 100 * time.Millisecond}, {100 * time.Millisecond, 100 * time.Millisecond}}},
		{"late sends at once", 10, []call{{0, 0}, {150 * time.Millisecond, 0}, {150 * time.Millisecond, 50 * time.Millisecond}}},
		// At 1,000/s a message due in under minSleep goes at once; the
		// third is the first worth a sleep.
		{"batches short sleeps", 1000, []call{
			{0, 0}, {0, 0}, {0, 2 * time.Millisecond}, {2 * time.Millisecond, 0}, {2 * time.Millisecond, 2 * time.Millisecond},
		}},
		// Five seconds late: the schedule slips to one second behind, so at
		// 100/s about 100 messages go in a burst, then pacing resumes.
		{"bounded catch-up", 100, []call{{5 * time.Second, 0}, {5 * time.Second, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
			p := newPacer(tt.rate, start)
			for i, c := range tt.calls {
				if got := p.delay(start.Add(c.at)); got != c.want {
					t.Errorf("call %d at +%v: delay = %v, want %v", i, c.at, got, c.want)
				}
			}
		})
	}
}

func TestPacerCatchUpIsBounded(t *testing.T) {
	start := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	p := newPacer(100, start)
	now := start.Add(5 * time.Second)
	burst := 0
	for p.delay(now) == 0 {
		burst++
		if burst > 1000 {
			t.Fatal("no pause after 1,000 messages")
		}
	}
	// One second of backlog at 100/s, give or take the minSleep window.
	if burst < 100 || burst > 102 {
		t.Errorf("burst of %d messages after a 5 s stall, want about 100", burst)
	}
}

func TestPacerWaitEndsWithContext(t *testing.T) {
	p := newPacer(0.5, time.Now()) // one message per 2 s
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := p.wait(ctx); err != nil {
		t.Fatalf("first wait: %v, want nil", err)
	}
	begin := time.Now()
	if err := p.wait(ctx); err == nil {
		t.Fatal("second wait returned nil, want the context's error")
	}
	if took := time.Since(begin); took > time.Second {
		t.Errorf("wait took %v after the context ended", took)
	}
}
