package search

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// searchCorpus builds n synthetic events: titles from a few templates, so
// queries of every selectivity exist.
func searchCorpus(n int) *fakeSummaries {
	rng := rand.New(rand.NewPCG(7, 8))
	people := []string{"Alice Martin", "Bob Nguyen", "Chloé Dubois", "Dmitri Volkov", "Eva Schmidt", "Farid Haddad", "Grace Lee", "Hiro Tanaka"}
	offices := []string{"Senate", "House", "Governor", "Mayor", "President", "Parliament"}
	places := []string{"Ohio", "Texas", "Québec", "Bavaria", "Kyoto", "Lagos", "Lima", "Oslo", "Perth", "Zürich"}
	things := []string{"BTC", "ETH", "gold", "oil", "S&P 500", "CPI", "GDP", "rates"}
	src := newFakeSummaries()
	for i := range n {
		var title string
		switch i % 4 {
		case 0:
			title = fmt.Sprintf("Will %s win the %d %s race in %s?", people[rng.IntN(len(people))], 2024+rng.IntN(4), offices[rng.IntN(len(offices))], places[rng.IntN(len(places))])
		case 1:
			title = fmt.Sprintf("%s above %d by %s %d?", things[rng.IntN(len(things))], rng.IntN(100000), []string{"June", "July", "December"}[rng.IntN(3)], 2025+rng.IntN(3))
		case 2:
			title = fmt.Sprintf("%s %s election: turnout over %d%%", places[rng.IntN(len(places))], offices[rng.IntN(len(offices))], 40+rng.IntN(50))
		default:
			title = fmt.Sprintf("Who will lead %s on %s? #%d", places[rng.IntN(len(places))], []string{"climate", "trade", "housing"}[rng.IntN(3)], i)
		}
		src.put(fmt.Sprintf("ev-%06d", i), title, float64(rng.IntN(1_000_000))/100)
	}
	return src
}

// searchQueries span selectivities: everything, a common prefix (early
// stop), common and rare substrings, a non-ASCII one, one title, none (a
// full scan).
var searchQueries = []string{"", "will", "election", "senate", "zürich", "#4242", "kyoto housing", "no such title"}

func BenchmarkSearch50k(b *testing.B) {
	x := loadedIndex(b, searchCorpus(50_000))
	for _, q := range searchQueries {
		b.Run(fmt.Sprintf("q=%q", q), func(b *testing.B) {
			for b.Loop() {
				x.Search(q, 20)
			}
		})
	}
}

// BenchmarkSearchUpdate50k is the cost of a change notice naming 10 events.
func BenchmarkSearchUpdate50k(b *testing.B) {
	src := searchCorpus(50_000)
	x := loadedIndex(b, src)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(9, 10))
	ids := make([]string, 10)
	for b.Loop() {
		for i := range ids {
			ids[i] = fmt.Sprintf("ev-%06d", rng.IntN(50_000))
			src.put(ids[i], "Updated title "+ids[i], float64(rng.IntN(1_000_000))/100)
		}
		if err := x.Update(ctx, ids); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSearchLoad50k(b *testing.B) {
	x := New(searchCorpus(50_000), nil)
	for b.Loop() {
		if err := x.Load(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSearchRandom50k runs random searches (parts and words of titles,
// random letters that mostly match nothing, empty and one-letter queries;
// limits 1–50) from GOMAXPROCS concurrent readers while a writer applies a
// notice of two events every 5 ms, and reports latency percentiles.
func BenchmarkSearchRandom50k(b *testing.B) {
	src := searchCorpus(50_000)
	x := loadedIndex(b, src)
	ids := slices.Sorted(maps.Keys(src.m))
	rng := rand.New(rand.NewPCG(13, 14))
	queries := make([]string, 1000)
	for i := range queries {
		title := src.meta[ids[rng.IntN(len(ids))]].title
		switch rng.IntN(4) {
		case 0: // part of a title: a prefix or inside
			from := rng.IntN(len(title)) * rng.IntN(2)
			queries[i] = title[from:min(len(title), from+1+rng.IntN(12))]
		case 1: // a word of a title
			words := strings.Fields(title)
			queries[i] = strings.ToUpper(words[rng.IntN(len(words))])
		case 2: // random letters: mostly no match
			l := make([]byte, 2+rng.IntN(8))
			for j := range l {
				l[j] = byte('a' + rng.IntN(26))
			}
			queries[i] = string(l)
		default: // empty or one character
			queries[i] = "aeiou #"[rng.IntN(7):][:rng.IntN(2)]
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	writer := make(chan struct{})
	go func() {
		defer close(writer)
		rng := rand.New(rand.NewPCG(15, 16))
		for ctx.Err() == nil {
			if err := x.Update(ctx, []string{ids[rng.IntN(len(ids))], ids[rng.IntN(len(ids))]}); err != nil {
				return
			}
			time.Sleep(5 * time.Millisecond) // pacing the writer, not waiting for an event
		}
	}()
	var mu sync.Mutex
	var durs []time.Duration
	var next atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			i := int(next.Add(1))
			start := time.Now()
			x.Search(queries[i%len(queries)], 1+i%50)
			mine = append(mine, time.Since(start))
		}
		mu.Lock()
		durs = append(durs, mine...)
		mu.Unlock()
	})
	b.StopTimer()
	cancel()
	<-writer
	slices.Sort(durs)
	b.ReportMetric(float64(durs[len(durs)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(durs[len(durs)*99/100].Nanoseconds()), "p99-ns")
}
