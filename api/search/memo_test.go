package search

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestSearchAnswerMemo: a repeated query reuses its rendered answer until
// the index changes; then it is rendered afresh.
func TestSearchAnswerMemo(t *testing.T) {
	ctx := context.Background()
	src := newFakeSummaries()
	src.put("e1", "Will it rain", 10)
	x := New(src, nil)
	if err := x.Load(ctx); err != nil {
		t.Fatal(err)
	}
	renders := 0
	render := func(items [][]byte) ([]byte, string) {
		renders++
		body := bytes.Join(items, []byte(","))
		return body, fmt.Sprintf("%q", fmt.Sprint(len(body)))
	}
	first, tag := x.Answer("rain", 20, Filter{}, render)
	again, againTag := x.Answer("rain", 20, Filter{}, render)
	if renders != 1 || string(first) != string(again) || tag != fmt.Sprintf("%q", fmt.Sprint(len(first))) || againTag != tag {
		t.Fatalf("repeated query: %d renders, tags %s %s; want 1 render and the body's tag twice", renders, tag, againTag)
	}
	src.put("e2", "Rain in Spain", 99)
	if err := x.Update(ctx, []string{"e2"}); err != nil {
		t.Fatal(err)
	}
	after, _ := x.Answer("rain", 20, Filter{}, render)
	if renders != 2 || !strings.Contains(string(after), `"e2"`) {
		t.Errorf("after an update: %d renders, answer %s; want a fresh answer holding e2", renders, after)
	}
}
