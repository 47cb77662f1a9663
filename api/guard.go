package api

import (
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
)

// guardBody bounds the reading of a declared request body on every route
// and closes the connection after a reply that left the body unread.
//
// net/http reads what is left of a small unread body before it writes a
// reply, to reuse the connection, and does so without a deadline: a
// client that declared a body and never sent it got no answer at all, on
// every route that does not read bodies, and held a connection (a file
// descriptor) for ever. With Connection: close net/http skips that read
// (and the one it makes after the reply fails at once, see below).
// The read deadline covers the handlers that read bodies themselves
// (asynqmon's); it is lifted once the body is in, since net/http's
// background read for a client hang-up would otherwise fail at it and
// cancel the request.
func (s *server) guardBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if req.ContentLength == 0 || req.Body == nil || req.Body == http.NoBody {
			return next(c)
		}
		// The body's state holds its response controller, and its
		// methods are the hooks: each was an allocation of its own.
		g := &guardedBody{ReadCloser: req.Body, res: c.Response(), rc: *http.NewResponseController(c.Response())}
		g.deadline = g.rc.SetReadDeadline(time.Now().Add(s.cfg.BodyReadTimeout)) == nil
		req.Body = g
		c.Response().Before(g.closeUnread)
		err := next(c)
		if !g.eof.Load() {
			// After the reply net/http still reads up to 256 KiB of an
			// unread body, with no deadline, before it closes the
			// connection: a deadline now makes that read fail at once.
			_ = g.rc.SetReadDeadline(time.Now())
		}
		return err
	}
}

// guardedBody notes when a request body has been read to its end.
type guardedBody struct {
	io.ReadCloser
	res      *echo.Response
	rc       http.ResponseController
	deadline bool // a read deadline was set, to be lifted at the body's end
	eof      atomic.Bool
	once     sync.Once
}

// closeUnread is the response's Before hook: a reply that leaves the
// body unread closes the connection.
func (g *guardedBody) closeUnread() {
	if !g.eof.Load() {
		g.res.Header().Set(echo.HeaderConnection, "close")
	}
}

func (g *guardedBody) Read(p []byte) (int, error) {
	n, err := g.ReadCloser.Read(p)
	if err == io.EOF {
		g.eof.Store(true)
		if g.deadline {
			g.once.Do(g.lift)
		}
	}
	return n, err
}

// lift lifts the read deadline guardBody set.
func (g *guardedBody) lift() { _ = g.rc.SetReadDeadline(time.Time{}) }

// MaxConnsDefault is ConnLimiter's cap when given none.
const MaxConnsDefault = 512

// ConnLimiter caps the connections a server holds open at once, so that
// clients holding sockets (slow headers, idle keep-alives) cannot take
// every file descriptor and leave /healthz unanswered. At the cap, a new
// connection closes the oldest one that carries no request in progress
// (one still sending its headers, or idle between requests); when every
// connection is serving a request, the new one is closed at once.
//
// Use it as the server's listener and ConnState hook together:
//
//	lim := api.NewConnLimiter(n)
//	srv := &http.Server{Handler: e, ConnState: lim.ConnState, ReadHeaderTimeout: ...}
//	srv.Serve(lim.Listener(ln))
type ConnLimiter struct {
	max   int
	mu    sync.Mutex
	conns map[connKey]*tracked // by remote address: a TLS listener above wraps the conns
	shed  atomic.Int64
}

// tracked is one open connection.
type tracked struct {
	conn    net.Conn
	busy    bool      // a request is in progress (http.StateActive)
	since   time.Time // when it last became idle or was accepted
	closing bool      // closed by the limiter, not yet reported closed
}

// NewConnLimiter returns a limiter of max connections (MaxConnsDefault
// when max < 1).
func NewConnLimiter(max int) *ConnLimiter {
	if max < 1 {
		max = MaxConnsDefault
	}
	return &ConnLimiter{max: max, conns: map[connKey]*tracked{}}
}

// connKey is a connection's remote address: a TCP address as it is, any
// other as its string. ConnState is called twice a request, and
// formatting a TCP address each time was two allocations.
type connKey struct {
	tcp   netip.AddrPort
	other string
}

func keyOf(c net.Conn) connKey {
	switch a := c.RemoteAddr().(type) {
	case *net.TCPAddr:
		return connKey{tcp: a.AddrPort()}
	case nil:
		return connKey{}
	default:
		return connKey{other: a.String()}
	}
}

// Shed is how many connections the limiter has closed.
func (l *ConnLimiter) Shed() int64 { return l.shed.Load() }

// Listener wraps ln so that it enforces the cap.
func (l *ConnLimiter) Listener(ln net.Listener) net.Listener {
	return &limitListener{Listener: ln, l: l}
}

type limitListener struct {
	net.Listener
	l *ConnLimiter
}

func (ll *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if ll.l.admit(c) {
			return c, nil
		}
		_ = c.Close()
	}
}

// admit tracks c, making room by closing the oldest connection without a
// request in progress; false when there is no room.
func (l *ConnLimiter) admit(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	open := 0
	var victim *tracked
	for _, t := range l.conns {
		if t.closing {
			continue
		}
		open++
		if !t.busy && (victim == nil || t.since.Before(victim.since)) {
			victim = t
		}
	}
	if open >= l.max {
		l.shed.Add(1)
		if victim == nil {
			return false
		}
		victim.closing = true
		_ = victim.conn.Close() // net/http reports it closed, which untracks it
	}
	l.conns[keyOf(c)] = &tracked{conn: c, since: time.Now()}
	return true
}

// ConnState is the http.Server hook that tells the limiter which
// connections are serving a request.
func (l *ConnLimiter) ConnState(c net.Conn, s http.ConnState) {
	key := keyOf(c)
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.conns[key]
	if !ok {
		return
	}
	switch s {
	case http.StateActive:
		t.busy = true
	case http.StateIdle:
		t.busy, t.since = false, time.Now()
	case http.StateClosed, http.StateHijacked:
		delete(l.conns, key)
	}
}

// checkQuery refuses a query string that does not parse, naming the
// parameter: echo's QueryParam drops a pair with a bad percent escape,
// so "?cron_expr=%zz" used to read as "cron_expr: is required".
func checkQuery(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		raw := c.Request().URL.RawQuery
		for raw != "" {
			var pair string
			pair, raw, _ = strings.Cut(raw, "&")
			if strings.Contains(pair, ";") {
				return fieldError("query", "%q: separate parameters with '&', not ';'", cut(pair, 100))
			}
			k, v, _ := strings.Cut(pair, "=")
			name, err := url.QueryUnescape(k)
			if err != nil {
				return fieldError("query", "invalid percent escape in parameter name %q", cut(k, 100))
			}
			if _, err := url.QueryUnescape(v); err != nil {
				return fieldError(name, "invalid percent escape in %q (write a literal %% as %%25)", cut(v, 100))
			}
		}
		return next(c)
	}
}

// cut shortens s to at most n bytes for a message.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
