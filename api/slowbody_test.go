package api_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api"
)

// TestDeclaredButUnsentBody (issue 26 finding 2): a request that declares
// a body and never sends it gets its answer on every route, and its
// connection is closed after it; a route that reads the body gives up at
// BodyReadTimeout. Before, net/http waited for the body, without a
// deadline, before it wrote any reply, so the socket was held for ever.
func TestDeclaredButUnsentBody(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{cfg: &api.Config{BodyReadTimeout: 300 * time.Millisecond}})
	srv := httptest.NewServer(b.e)
	t.Cleanup(srv.Close)

	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, "/healthz", http.StatusOK},
		{http.MethodGet, "/v1/preview?cron_expr=*+*+*+*+*", http.StatusOK},
		{http.MethodPost, "/v1/preview", http.StatusMethodNotAllowed},
		{http.MethodGet, "/nope", http.StatusNotFound},
		{http.MethodDelete, "/schedules/s1", http.StatusNotFound},
		{http.MethodGet, "/schedules/bad%zz", http.StatusBadRequest},
		{http.MethodPost, "/schedules/upsert", http.StatusRequestTimeout},
	} {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() }) // before srv.Close, which waits for the server's side
		_, err = io.WriteString(conn, tc.method+" "+tc.path+" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n")
		require.NoError(t, err)
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
		r := bufio.NewReader(conn)
		resp, err := http.ReadResponse(r, nil)
		require.NoError(t, err, "%s %s: no answer", tc.method, tc.path)
		require.Equal(t, tc.status, resp.StatusCode, "%s %s", tc.method, tc.path)
		_, err = io.Copy(io.Discard, resp.Body)
		require.NoError(t, err)
		resp.Body.Close()
		require.True(t, resp.Close, "%s %s: the reply must close the connection", tc.method, tc.path)
		_, err = r.ReadByte()
		require.True(t, errors.Is(err, io.EOF), "%s %s: the server must close the connection, got %v", tc.method, tc.path, err)
	}

	// A body sent in full keeps the connection for the next request.
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	require.NoError(t, conn.SetDeadline(time.Now().Add(5*time.Second)))
	r := bufio.NewReader(conn)
	for range 2 {
		_, err = io.WriteString(conn, "POST /schedules/pause HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
		require.NoError(t, err)
		resp, err := http.ReadResponse(r, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)
		require.False(t, resp.Close)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// With authentication, a refusal (401, 429) comes before any handler:
// it too must not wait for a declared body, or an unauthenticated client
// holds sockets for ever.
func TestDeclaredButUnsentBodyRefusedByAuth(t *testing.T) {
	t.Parallel()
	b := setupAuth(t, api.Config{BodyReadTimeout: 300 * time.Millisecond})
	srv := httptest.NewServer(b.e)
	t.Cleanup(srv.Close)
	for _, path := range []string{"/schedules/upsert", "/v1/preview", "/nope"} {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() }) // before srv.Close, which waits for the server's side
		_, err = io.WriteString(conn, "POST "+path+" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n")
		require.NoError(t, err)
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
		r := bufio.NewReader(conn)
		resp, err := http.ReadResponse(r, nil)
		require.NoError(t, err, "POST %s: no answer", path)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, path)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		_, err = r.ReadByte()
		require.True(t, errors.Is(err, io.EOF), "POST %s: the server must close the connection, got %v", path, err)
	}
}
