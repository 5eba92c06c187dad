package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"

	"github.com/marketdata/marketdata/api/edge"
)

// What `marketdata dev` does differently from the production commands, so
// that a newcomer's first run on their own machine neither warns nor locks
// them out. None of it applies to `marketdata api` or `ingest`.

// devListeners are every port dev serves on, bound before dev migrates or
// publishes anything: a second dev whose ports are taken stops before its
// feed writes into the first one's stream.
type devListeners struct {
	http, ingestAdmin, docs, apiAdmin net.Listener
}

// bindDev binds MD_HTTP_ADDR, MD_ADMIN_ADDR (ingest's admin), MD_DOCS_ADDR
// and a free loopback port for the API's admin server. A busy port is
// refused naming the address and the variable that moves it; what was
// bound is closed.
func bindDev(cfg *Config) (*devListeners, error) {
	l := &devListeners{}
	for _, p := range []struct {
		ln         *net.Listener
		name, addr string
	}{
		{&l.http, "MD_HTTP_ADDR", cfg.HTTPAddr},
		{&l.ingestAdmin, "MD_ADMIN_ADDR", cfg.AdminAddr},
		{&l.docs, "MD_DOCS_ADDR", cfg.DocsAddr},
		{&l.apiAdmin, "", "127.0.0.1:0"},
	} {
		ln, err := net.Listen("tcp", p.addr)
		if err != nil {
			l.close()
			if p.name == "" {
				return nil, fmt.Errorf("dev: no free loopback port for the API's admin server: %w", err)
			}
			reason := "cannot listen on " + p.addr + ": " + err.Error() + "; set " + p.name + " to move it"
			if errors.Is(err, syscall.EADDRINUSE) {
				reason = p.addr + " is in use (another marketdata dev?); set " + p.name + " to another address (port 0 takes any free one)"
			}
			return nil, &configError{p.name, reason}
		}
		*p.ln = ln
	}
	return l, nil
}

// close closes every listener not handed over yet; closing one a server
// already closed does nothing.
func (l *devListeners) close() {
	for _, ln := range []net.Listener{l.http, l.ingestAdmin, l.docs, l.apiAdmin} {
		if ln != nil {
			ln.Close() // closed already by its server, or never served: the error says nothing
		}
	}
}

// loopback is what the failed-authentication limit does not apply to in dev.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// devNotes says, for the banner, which dev-only settings are in force.
type devNotes struct {
	docsOrigin string
	// alsoLocalhost: the docs site is allowed as localhost too.
	alsoLocalhost bool
	// maxConns is MD_MAX_CONNS as fitted, and nofile the limit it was fitted
	// under (0: it fit as set).
	maxConns int
	nofile   uint64
}

// applyDevSettings sets what dev does differently on cfg:
//   - the failed-authentication limit does not apply to loopback clients:
//     the developer's own mistyped keys must not lock the demo key out;
//   - the docs origin (CORS) is the docs site as bound, unless
//     MD_DOCS_ORIGIN says otherwise: moving MD_DOCS_ADDR moves it; a site
//     bound on 127.0.0.1 is also allowed as localhost (a browser opened on
//     http://localhost:8081 sends that origin);
//   - the soft open-file limit is raised to the hard one, and MD_MAX_CONNS
//     lowered to fit under it rather than warned about.
func applyDevSettings(cfg *Config, getenv func(string) string, docsAddr string, raise func() (uint64, error)) (devNotes, error) {
	cfg.AuthFailExempt = loopback
	var alsoLocalhost bool
	if strings.TrimSpace(getenv("MD_DOCS_ORIGIN")) == "" {
		urls, err := docsAPIURLs("", docsAddr)
		if err != nil {
			return devNotes{}, err
		}
		if cfg.DocsOrigin, err = parseOrigin(urls[0]); err != nil {
			return devNotes{}, &configError{"MD_DOCS_ADDR", err.Error()}
		}
		if port, ok := strings.CutPrefix(cfg.DocsOrigin, "http://127.0.0.1:"); ok {
			cfg.AppOrigins = append(cfg.AppOrigins, "http://localhost:"+port)
			alsoLocalhost = true
		}
	}
	n := devNotes{docsOrigin: cfg.DocsOrigin, alsoLocalhost: alsoLocalhost, maxConns: cfg.MaxConns}
	if nofile, err := raise(); err == nil {
		if fit := edge.FitConns(cfg.MaxConns, nofile); fit != cfg.MaxConns {
			cfg.MaxConns, n.maxConns, n.nofile = fit, fit, nofile
		}
	}
	return n, nil
}

// banner is the "dev settings" line of the banner.
func (n devNotes) banner() string {
	s := "failed-auth limit off for loopback clients; docs origin " + n.docsOrigin
	if n.alsoLocalhost {
		s += " (and as localhost)"
	}
	if n.nofile != 0 {
		s += fmt.Sprintf("; MD_MAX_CONNS %d (fits the open-file limit %d)", n.maxConns, n.nofile)
	}
	return s
}
