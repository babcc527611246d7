// Package upstreamtest is an HTTP upstream for tests that records what
// reaches it and when: the request headers, each body read as it arrived,
// and whether the body ended (the request completed) or was cut off (the
// proxy in front reset the request). Requests are told apart by the
// x-case-id header the test sends; each gets the reply the test set for
// its id.
package upstreamtest

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// IDHeader names the request header that identifies a request.
const IDHeader = "x-case-id"

// Reply is what the recorder answers one request with.
type Reply struct {
	Status int // 200 when 0
	// Headers of the response; without content-length the body goes out
	// chunked, one chunk per element of Body, each flushed.
	Headers [][2]string
	Body    [][]byte
	// Gap is the pause between body chunks.
	Gap time.Duration
}

// Chunk is one body read.
type Chunk struct {
	At   time.Time
	Data []byte
}

// Record is what one request brought.
type Record struct {
	Method, Path string
	Header       http.Header
	HeadersAt    time.Time
	Chunks       []Chunk
	// Complete: the body was read to its end. Aborted: reading it failed
	// (the connection or stream was cut before the end). EndAt is when
	// either was seen.
	Complete, Aborted bool
	EndAt             time.Time
}

// Body returns the body bytes that arrived.
func (r *Record) Body() []byte {
	var b []byte
	for _, c := range r.Chunks {
		b = append(b, c.Data...)
	}
	return b
}

type entry struct {
	rec     Record
	headers chan struct{} // closed when the headers arrived
	ended   chan struct{} // closed when the body ended or was cut
}

// Recorder is a recording upstream on a loopback httptest.Server.
type Recorder struct {
	URL     string
	srv     *httptest.Server
	mu      sync.Mutex
	entries map[string]*entry
	replies map[string]Reply
	next    atomic.Uint64
}

// New starts a Recorder; Close stops it.
func New() *Recorder {
	r := &Recorder{entries: map[string]*entry{}, replies: map[string]Reply{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	r.URL = r.srv.URL
	return r
}

// Close stops the server.
func (r *Recorder) Close() { r.srv.Close() }

// NewID returns a fresh request id and sets the reply for it.
func (r *Recorder) NewID(reply Reply) string {
	id := "c" + strconv.FormatUint(r.next.Add(1), 10)
	r.mu.Lock()
	r.replies[id] = reply
	r.mu.Unlock()
	return id
}

func (r *Recorder) entry(id string) *entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[id]
	if !ok {
		e = &entry{headers: make(chan struct{}), ended: make(chan struct{})}
		r.entries[id] = e
	}
	return e
}

func (r *Recorder) serve(w http.ResponseWriter, req *http.Request) {
	id := req.Header.Get(IDHeader)
	e := r.entry(id)
	r.mu.Lock()
	if !e.rec.HeadersAt.IsZero() {
		r.mu.Unlock()
		http.Error(w, "upstreamtest: a second request with id "+id, http.StatusConflict)
		return
	}
	e.rec.Method, e.rec.Path, e.rec.Header, e.rec.HeadersAt = req.Method, req.URL.RequestURI(), req.Header.Clone(), time.Now()
	reply := r.replies[id]
	r.mu.Unlock()
	close(e.headers)
	buf := make([]byte, 64<<10)
	for {
		n, err := req.Body.Read(buf)
		r.mu.Lock()
		if n > 0 {
			e.rec.Chunks = append(e.rec.Chunks, Chunk{At: time.Now(), Data: append([]byte(nil), buf[:n]...)})
		}
		if err != nil {
			e.rec.EndAt = time.Now()
			if errors.Is(err, io.EOF) {
				e.rec.Complete = true
			} else {
				e.rec.Aborted = true
			}
		}
		r.mu.Unlock()
		if err != nil {
			close(e.ended)
			if !errors.Is(err, io.EOF) {
				return
			}
			break
		}
	}
	for _, h := range reply.Headers {
		w.Header().Add(h[0], h[1])
	}
	status := reply.Status
	if status == 0 {
		status = 200
	}
	w.WriteHeader(status)
	for i, c := range reply.Body {
		if i > 0 && reply.Gap > 0 {
			time.Sleep(reply.Gap)
		}
		if _, err := w.Write(c); err != nil {
			return
		}
		_ = http.NewResponseController(w).Flush()
	}
}

// Get returns a copy of what the request with id brought, or nil when
// nothing arrived.
func (r *Recorder) Get(id string) *Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[id]
	if !ok || e.rec.HeadersAt.IsZero() {
		return nil
	}
	c := e.rec
	c.Chunks = append([]Chunk(nil), c.Chunks...)
	return &c
}

// WaitHeaders waits up to d for the request headers of id.
func (r *Recorder) WaitHeaders(id string, d time.Duration) error {
	select {
	case <-r.entry(id).headers:
		return nil
	case <-time.After(d):
		return fmt.Errorf("upstreamtest: no request %s within %v", id, d)
	}
}

// WaitEnd waits up to d for the request of id to complete or be cut off,
// and returns its record.
func (r *Recorder) WaitEnd(id string, d time.Duration) (*Record, error) {
	select {
	case <-r.entry(id).ended:
		return r.Get(id), nil
	case <-time.After(d):
		return r.Get(id), fmt.Errorf("upstreamtest: request %s did not end within %v", id, d)
	}
}
