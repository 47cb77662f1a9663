package main

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Held sockets cannot take every connection (issue 26 finding 2: 1,100
// of them made /healthz time out under a 1,024-file limit): at MAX_CONNS
// a new connection closes the oldest one that carries no request, so
// /healthz answers at once however many sockets sit on half-sent headers.
func TestHeldSocketsDoNotStarveHealthz(t *testing.T) {
	t.Parallel()
	const maxConns, held = 20, 60
	req, base := startInProcessAt(t, "dev", "--http-addr", "127.0.0.1:0", "--log-level", "error", "--max-conns", "20")
	code, _ := req(http.MethodGet, "/healthz", "")
	require.Equal(t, http.StatusOK, code)
	addr := strings.TrimPrefix(base, "http://")

	var conns []net.Conn
	for range held {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		_, err = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n") // never ends its headers
		require.NoError(t, err)
		conns = append(conns, c)
	}

	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for range 5 {
		resp, err := client.Get("http://" + addr + "/healthz")
		require.NoError(t, err, "/healthz with %d sockets held", held)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}

	// The oldest held sockets were closed by the server to make room.
	closed := 0
	deadline := time.Now().Add(time.Second)
	for _, c := range conns {
		require.NoError(t, c.SetReadDeadline(deadline))
		_, err := c.Read(make([]byte, 1))
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			closed++
		}
	}
	require.GreaterOrEqual(t, closed, held-maxConns, "held sockets closed by the server")
}
