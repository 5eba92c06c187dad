package stream

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/internal/notice"
)

// BenchmarkFanOut is the hub alone, in one process: 1,000 connections ×
// 20 of 400 markets (50 subscribers a market, the shape of mdbench's
// stream at a fifth of its size), notices of one market each at 1,000/s,
// the price source in memory. Each iteration is one notice (~50
// deliveries). It reports notice → client latency, writes per delivery
// and the process's CPU per delivery (the clients' reads included: compare
// runs, not with mdbench). Run it alone:
//
//	go test -run '^$' -bench FanOut -benchtime 20000x ./api/stream/
func BenchmarkFanOut(b *testing.B) {
	const conns, subs, markets, rate = 1000, 20, 400, 1000
	src := newFakePrices()
	ids := marketIDs(markets)
	for _, id := range ids {
		src.set(id, 1)
	}
	h := startHub(b, src, quietConfig())
	var (
		mu   sync.Mutex
		lats []int64
		got  int
	)
	var wg sync.WaitGroup
	clients := make([]*websocket.Conn, conns)
	for i := range clients {
		ws, _, err := websocket.DefaultDialer.Dial(h.url, nil)
		if err != nil {
			b.Fatal(err)
		}
		clients[i] = ws
		mine := make([]string, subs)
		for j := range mine {
			mine[j] = ids[(i*7+j*13)%markets]
		}
		slices.Sort(mine)
		mine = slices.Compact(mine)
		cmd := `{"op":"subscribe","market_ids":["` + strings.Join(mine, `","`) + `"]}`
		if err := ws.WriteMessage(websocket.TextMessage, []byte(cmd)); err != nil {
			b.Fatal(err)
		}
		for range 1 + len(mine) { // the ack and the snapshot
			if _, _, err := ws.ReadMessage(); err != nil {
				b.Fatal(err)
			}
		}
		wg.Go(func() {
			var mine []int64
			n := 0
			for {
				_, data, err := ws.ReadMessage()
				if err != nil {
					break
				}
				now := time.Now().UnixNano()
				if k := bytes.Index(data, []byte(`"ts":`)); k >= 0 {
					end := bytes.IndexByte(data[k+5:], ',')
					if ts, err := strconv.ParseInt(string(data[k+5:k+5+end]), 10, 64); err == nil {
						mine = append(mine, now-ts)
					}
				}
				n++
			}
			mu.Lock()
			lats = append(lats, mine...)
			got += n
			mu.Unlock()
		})
	}
	writes0 := h.writes.Load()
	cpu0 := cpuTime()
	b.ResetTimer()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	v := int64(1)
	for i := 0; i < b.N; {
		<-tick.C
		for range rate / 100 {
			if i == b.N {
				break
			}
			id := ids[i%markets]
			if i%markets == 0 {
				v++
			}
			body := fmt.Appendf(nil, `{"market_id":%q,"version":%d,"ts":%d,"pad":"%s"}`, id, v, time.Now().UnixNano(), strings.Repeat("x", 300))
			// A hub that reads finds the same item, from memory.
			src.mu.Lock()
			src.items[id] = cache.PriceItem{Found: true, Served: true, Rev: v, Body: body}
			src.mu.Unlock()
			h.OnChange(notice.Change{Markets: []string{id}, Prices: []notice.Price{{ID: id, Rev: v, Served: true, Body: body}}})
			i++
		}
	}
	time.Sleep(time.Second) // drain
	b.StopTimer()
	cpu := cpuTime() - cpu0
	writes := h.writes.Load() - writes0
	for _, ws := range clients {
		ws.Close() //nolint:errcheck // the benchmark is over
	}
	wg.Wait()
	slices.Sort(lats)
	if len(lats) == 0 {
		b.Fatal("no delivery")
	}
	q := func(p float64) float64 { return float64(lats[int(p*float64(len(lats)-1))]) / 1e6 }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(float64(got)/float64(b.N), "deliveries/notice")
	b.ReportMetric(float64(writes)/float64(got), "writes/delivery")
	b.ReportMetric(float64(cpu.Microseconds())/float64(got), "cpu-µs/delivery")
}

// cpuTime is the process's user and system CPU so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru) //nolint:errcheck // zero then
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
