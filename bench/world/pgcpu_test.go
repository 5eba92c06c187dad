package world

import (
	"net/url"
	"testing"
	"time"
)

func TestPGGroupAndAppName(t *testing.T) {
	dsn := WithAppName("postgres://postgres@127.0.0.1:5432/mdbenchx_poll?sslmode=disable", "api-a")
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	app := u.Query().Get("application_name")
	if got, want := pgGroup(app), "api-a"; got != want {
		t.Errorf("group of %q = %q, want %q", app, got, want)
	}
	if got := u.Query().Get("sslmode"); got != "disable" {
		t.Errorf("sslmode %q lost", got)
	}
	for _, app := range []string{"", "psql", "mdbench-"} {
		if got := pgGroup(app); got != "other" {
			t.Errorf("group of %q = %q, want other", app, got)
		}
	}
}

func TestAttributePG(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 11, 0, 0, 0, time.UTC)
	ingest := pgKey{PID: 100, Start: t0.Add(-time.Hour)}
	api := pgKey{PID: 200, Start: t0.Add(-time.Hour)}
	ended := pgKey{PID: 300, Start: t0.Add(-time.Hour)}       // ended during the phase
	endedBefore := pgKey{PID: 400, Start: t0.Add(-time.Hour)} // ended before it
	born := pgKey{PID: 500, Start: t0.Add(time.Second)}       // started during it
	reused := pgKey{PID: 100, Start: t0.Add(2 * time.Second)} // the ingest pid again, a new backend
	groups := map[pgKey]string{ingest: "ingest", api: "api-a", ended: "ingest", endedBefore: "ingest", born: "api-a", reused: "other"}
	before := PGMark{at: t0, groups: groups, sessions: 40,
		ticks: map[pgKey]int64{ingest: 1000, api: 50, ended: 10, endedBefore: 7000},
		gone:  map[pgKey]bool{endedBefore: true}}
	after := PGMark{at: t0.Add(10 * time.Second), groups: groups, sessions: 45,
		ticks: map[pgKey]int64{ingest: 1300, api: 50, ended: 60, endedBefore: 7000, born: 40, reused: 5},
		gone:  map[pgKey]bool{endedBefore: true, ended: true, ingest: true}}
	got := attributePG(before, after)
	want := map[string]float64{"ingest": 3.5, "api-a": 0.4, "other": 0.05} // (300+50)/100, 40/100, 5/100
	for g, w := range want {
		if got.Seconds[g] != w {
			t.Errorf("seconds[%s] = %v, want %v", g, got.Seconds[g], w)
		}
	}
	if len(got.Seconds) != len(want) {
		t.Errorf("groups %v, want only %v", got.Seconds, want)
	}
	if got.Cores["ingest"] != 0.35 {
		t.Errorf("ingest cores %v, want 0.35", got.Cores["ingest"])
	}
	if got.Backends != 5 || got.Started != 2 || got.Ended != 2 {
		t.Errorf("backends %d started %d ended %d, want 5, 2, 2", got.Backends, got.Started, got.Ended)
	}
	if got.Sessions != 5 || got.Unsampled != 3 {
		t.Errorf("sessions %d unsampled %d, want 5 and 3", got.Sessions, got.Unsampled)
	}
}
