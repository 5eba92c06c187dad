package servicetest

import (
	"bytes"
	"encoding/json"
	"sync"
)

// listenWatch reads a starting node's JSON log as it is written and takes
// the addresses from its "admin listening" and "api listening" lines;
// found is closed once it has every address the node binds.
type listenWatch struct {
	wantHTTP bool
	found    chan struct{}

	mu          sync.Mutex
	line        []byte // the incomplete last line
	admin, http string
	done        bool
}

// maxLogLine bounds the incomplete line kept: a longer one is not a
// listening line, and is dropped.
const maxLogLine = 64 << 10

func newListenWatch(wantHTTP bool) *listenWatch {
	return &listenWatch{wantHTTP: wantHTTP, found: make(chan struct{})}
}

// Write never fails: the log itself goes to the node's LogBuffer.
func (w *listenWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return len(p), nil
	}
	w.line = append(w.line, p...)
	for {
		i := bytes.IndexByte(w.line, '\n')
		if i < 0 {
			break
		}
		w.parse(w.line[:i])
		w.line = w.line[i+1:]
		if w.admin != "" && (w.http != "" || !w.wantHTTP) {
			w.done, w.line = true, nil
			close(w.found)
			break
		}
	}
	if len(w.line) > maxLogLine {
		w.line = nil
	}
	return len(p), nil
}

func (w *listenWatch) parse(line []byte) {
	var rec struct {
		Msg  string `json:"msg"`
		Addr string `json:"addr"`
	}
	if json.Unmarshal(line, &rec) != nil || rec.Addr == "" {
		return
	}
	switch rec.Msg {
	case "admin listening":
		w.admin = rec.Addr
	case "api listening":
		w.http = rec.Addr
	}
}
