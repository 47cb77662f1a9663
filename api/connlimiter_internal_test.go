package api

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestConnLimiterTracksConnectionsByAddress serves through a ConnLimiter
// of two connections and checks what it knows of each by its remote
// address (keyOf): an idle one is shed for a newcomer, a busy one never
// is, and with both busy a newcomer is closed at once.
func TestConnLimiterTracksConnectionsByAddress(t *testing.T) {
	t.Parallel()
	lim := NewConnLimiter(2)
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/fast", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) { <-release })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: mux, ConnState: lim.ConnState, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(lim.Listener(ln)) }()
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
		_ = srv.Close()
	})

	state := func(c net.Conn) (tracked, busy bool) {
		// The server's end of c has c's local address as its remote one.
		local := c.LocalAddr().(*net.TCPAddr)
		lim.mu.Lock()
		defer lim.mu.Unlock()
		tr, ok := lim.conns[connKey{tcp: local.AddrPort()}]
		return ok, ok && tr.busy
	}
	dial := func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	send := func(c net.Conn, path string) {
		_, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
	}
	closed := func(c net.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := c.Read(make([]byte, 1))
		return err == io.EOF
	}

	idle := dial()
	send(idle, "/fast")
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Eventually(t, func() bool { ok, busy := state(idle); return ok && !busy }, 5*time.Second, time.Millisecond,
		"the connection is tracked idle after its reply")

	busy := dial()
	send(busy, "/slow")
	require.Eventually(t, func() bool { _, b := state(busy); return b }, 5*time.Second, time.Millisecond,
		"the connection is tracked busy during its request")

	third := dial()
	send(third, "/slow")
	require.True(t, closed(idle), "at the cap, the idle connection is shed for a new one")
	require.Eventually(t, func() bool { _, b := state(third); return b }, 5*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { ok, _ := state(idle); return !ok }, 5*time.Second, time.Millisecond,
		"a closed connection is no longer tracked")

	refused := dial()
	require.True(t, closed(refused), "with every connection busy, a new one is closed at once")
	require.Equal(t, int64(2), lim.Shed())
	ok, b := state(busy)
	require.True(t, ok && b, "a busy connection is never shed")

	close(release)
	released = true
	resp, err = http.ReadResponse(bufio.NewReader(busy), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// TestConnKeyOfOtherAddresses checks that an address not TCP is told
// apart by its string.
func TestConnKeyOfOtherAddresses(t *testing.T) {
	t.Parallel()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	require.Equal(t, connKey{other: "pipe"}, keyOf(a))
}
