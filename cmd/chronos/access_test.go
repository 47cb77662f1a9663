package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api/auth"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// testSecret is the AUTH_JWT_SECRET of tests that run with tokens.
const testSecret = "cmd-test-secret-cmd-test-secret-0123"

// adminAuthorization returns an Authorization header of scope admin
// signed with the --auth-jwt-secret among args, "" when there is none.
func adminAuthorization(t *testing.T, args []string) string {
	t.Helper()
	i := slices.Index(args, "--auth-jwt-secret")
	if i < 0 || i+1 >= len(args) {
		return ""
	}
	return "Bearer " + mintToken(t, args[i+1], "test", auth.ScopeAdmin)
}

// mintToken mints a token through the token command, as an operator does.
func mintToken(t *testing.T, secret, sub string, scopes ...auth.Scope) string {
	t.Helper()
	var out bytes.Buffer
	err := execute(context.Background(), []string{"token", "--sub", sub, "--scope", auth.Scopes(scopes).String(), "--ttl", "1h",
		"--auth-jwt-secret", secret}, &Env{Stdout: &out, Stderr: io.Discard})
	require.NoError(t, err)
	return strings.TrimSpace(out.String())
}

// The real binary's api and all refuse to start without authentication,
// saying what to set, and start open only with INSECURE, warning so.
func TestAPIRefusesToStartOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin, err := queuetest.BuildChronos(context.Background(), dir)
	require.NoError(t, err)
	r := queuetest.StartRedis(t)
	baseEnv := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "REDIS_URL=" + r.URL}

	for _, sub := range []string{"api", "all"} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, bin, sub)
		cmd.Env = append(slices.Clone(baseEnv), "HTTP_ADDR=127.0.0.1:0")
		out, err := cmd.CombinedOutput()
		cancel()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "%s started open: %s", sub, out)
		require.Equal(t, 1, exit.ExitCode())
		for _, want := range []string{"no authentication configured", "AUTH_JWT_SECRET", "AUTH_JWT_PUBLIC_KEY", "chronos token", "--insecure (INSECURE=true)"} {
			require.Contains(t, string(out), want, sub)
		}
	}

	// With INSECURE it starts, open, and says so. Port 0: the address
	// it listens on is in its log.
	var logs syncBuffer
	cmd := exec.Command(bin, "api")
	cmd.Env = append(slices.Clone(baseEnv), "HTTP_ADDR=127.0.0.1:0", "INSECURE=true")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.SysProcAttr = queuetest.ProcAttrDiesWithTest()
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	require.Eventually(t, func() bool {
		addr := loggedHTTPAddr(logs.String())
		if addr == "" {
			return false
		}
		resp, err := http.Get("http://" + addr + "/schedules")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 20*time.Second, 50*time.Millisecond, "api --insecure did not serve: %s", &logs)
	require.Contains(t, logs.String(), "INSECURE: the API is open")
}

// httpAddrRE finds the address of "chronos started" in a text or JSON log.
var httpAddrRE = regexp.MustCompile(`msg"?[=:]"?chronos started"?.*?http_addr"?[=:]"?([0-9.]+:[0-9]+)`)

// loggedHTTPAddr returns the HTTP address a chronos process logged it
// listens on, "" before it did.
func loggedHTTPAddr(logs string) string {
	m := httpAddrRE.FindStringSubmatch(logs)
	if m == nil {
		return ""
	}
	return m[1]
}

// chronos dev runs open on loopback and says so; elsewhere it needs auth
// or --insecure, and it takes auth settings when given.
func TestDevAccess(t *testing.T) {
	t.Parallel()
	err := execute(context.Background(), []string{"dev", "--http-addr", "0.0.0.0:0"}, &Env{Stdout: io.Discard, Stderr: io.Discard})
	require.ErrorContains(t, err, "HTTP_ADDR=0.0.0.0:0 is not a loopback address")

	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- execute(ctx, []string{"dev", "--http-addr", "127.0.0.1:0"}, &Env{Stdout: io.Discard, Stderr: &logs, Ready: ready})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("dev exited: %v", err)
	}
	cancel()
	require.NoError(t, <-done)
	require.Contains(t, logs.String(), "chronos dev: the API is open, without authentication, on loopback only")

	req := startInProcess(t, "dev", "--http-addr", "127.0.0.1:0", "--log-level", "error", "--auth-jwt-secret", testSecret)
	code, body := req(http.MethodGet, "/schedules", "")
	require.Equal(t, http.StatusOK, code, body) // the helper sends an admin token
}

// With a secret, every route needs a token: /metrics needs admin, the
// dashboard its login; METRICS_ADDR serves /metrics apart, open.
func TestAPIWithTokens(t *testing.T) {
	t.Parallel()
	r := queuetest.StartRedis(t)
	// Port 0: a free port chosen first could be taken before the bind.
	metricsReady := make(chan string, 1)
	_, base := startInProcessEnv(t, Env{MetricsReady: metricsReady}, "all", "--redis-url", r.URL, "--http-addr", "127.0.0.1:0",
		"--log-level", "error", "--auth-jwt-secret", testSecret, "--metrics-addr", "127.0.0.1:0")
	metricsAddr := <-metricsReady // sent before the HTTP address
	get := func(url, authz, accept string) (int, string, http.Header) {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		require.NoError(t, err)
		if authz != "" {
			req.Header.Set("Authorization", authz)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	reader := "Bearer " + mintToken(t, testSecret, "reader", auth.ScopeSchedulesRead)
	admin := "Bearer " + mintToken(t, testSecret, "ops", auth.ScopeAdmin)

	code, body, _ := get(base+"/schedules", "", "")
	require.Equal(t, http.StatusUnauthorized, code, body)
	require.Contains(t, body, `"code":"unauthenticated"`)
	code, _, _ = get(base+"/schedules", reader, "")
	require.Equal(t, http.StatusOK, code)
	code, _, _ = get(base+"/healthz", "", "")
	require.Equal(t, http.StatusOK, code)

	// /metrics is not on HTTP_ADDR (METRICS_ADDR has it), and a
	// stranger cannot even learn that.
	code, _, _ = get(base+"/metrics", "", "")
	require.Equal(t, http.StatusUnauthorized, code)
	code, body, _ = get("http://"+metricsAddr+"/metrics", "", "")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "chronos_http_requests_total")

	// The real asynqmon: a page load goes to the login form, its API
	// answers 401, and a token of scope schedules:read can look.
	code, _, h := get(base+"/monitoring/", "", "text/html")
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, "/monitoring/login", h.Get("Location"))
	code, _, _ = get(base+"/monitoring/api/queues", "", "")
	require.Equal(t, http.StatusUnauthorized, code)
	code, body, _ = get(base+"/monitoring/api/queues", reader, "")
	require.Equal(t, http.StatusOK, code, body)
	code, _, _ = get(base+"/monitoring/api/redis_info", admin, "")
	require.Equal(t, http.StatusOK, code)
}

// Without METRICS_ADDR, /metrics needs a token of scope admin, on every
// process that has a key configured.
func TestMetricsNeedAdmin(t *testing.T) {
	t.Parallel()
	r := queuetest.StartRedis(t)
	_, base := startInProcessAt(t, "scheduler", "--redis-url", r.URL, "--http-addr", "127.0.0.1:0", "--log-level", "error",
		"--auth-jwt-secret", testSecret)
	for authz, want := range map[string]int{
		"": http.StatusUnauthorized,
		"Bearer " + mintToken(t, testSecret, "reader", auth.ScopeSchedulesRead): http.StatusForbidden,
		"Bearer " + mintToken(t, testSecret, "ops", auth.ScopeAdmin):            http.StatusOK,
	} {
		req, err := http.NewRequest(http.MethodGet, base+"/metrics", nil)
		require.NoError(t, err)
		if authz != "" {
			req.Header.Set("Authorization", authz)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, want, resp.StatusCode, authz)
	}
}

func TestTokenCommand(t *testing.T) {
	t.Parallel()
	tok := mintToken(t, testSecret, "did:matrix:u1:fp", auth.ScopeSchedulesRead, auth.ScopeRunsWrite)
	v, err := auth.NewVerifier(auth.Config{Secret: []byte(testSecret)})
	require.NoError(t, err)
	id, err := v.Verify(tok)
	require.NoError(t, err)
	require.Equal(t, "did:matrix:u1:fp", id.Subject)
	require.Equal(t, auth.Scopes{auth.ScopeSchedulesRead, auth.ScopeRunsWrite}, id.Scopes)
	require.WithinDuration(t, time.Now().Add(time.Hour), id.ExpiresAt, time.Minute)

	for args, want := range map[string]string{
		"--sub x --scope admin":                                          "AUTH_JWT_SECRET (HS256) or AUTH_JWT_PRIVATE_KEY",
		"--sub x --scope admn --auth-jwt-secret " + testSecret:           `unknown scope "admn"`,
		"--sub x --scope admin --auth-jwt-secret short":                  "at least 32 bytes",
		"--sub x --scope admin --ttl 0s --auth-jwt-secret " + testSecret: "ttl: must be positive",
	} {
		err := execute(context.Background(), append([]string{"token"}, strings.Fields(args)...), &Env{Stdout: io.Discard, Stderr: io.Discard})
		require.ErrorContains(t, err, want, args)
	}
}

// Under mTLS a client without a certificate of TLS_CLIENT_CA_FILE is
// refused (the probes excepted), and one with it still needs a token.
func TestMutualTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, caKey := newCA(t, "chronos test CA")
	other, otherKey := newCA(t, "another CA")
	serverCert, serverKey := leaf(t, ca, caKey, "server", true)
	clientCert, clientKey := leaf(t, ca, caKey, "executor-1", false)
	strangerCert, strangerKey := leaf(t, other, otherKey, "stranger", false)
	write := func(name string, blocks ...*pem.Block) string {
		var b bytes.Buffer
		for _, bl := range blocks {
			require.NoError(t, pem.Encode(&b, bl))
		}
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b.Bytes(), 0o600))
		return p
	}
	certFile := write("server.pem", serverCert)
	keyFile := write("server-key.pem", serverKey)
	caFile := write("ca.pem", &pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})

	r := queuetest.StartRedis(t)
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- execute(ctx, []string{"api", "--redis-url", r.URL, "--http-addr", "127.0.0.1:0", "--log-level", "error",
			"--auth-jwt-secret", testSecret, "--tls-cert-file", certFile, "--tls-key-file", keyFile, "--tls-client-ca-file", caFile},
			&Env{Stdout: io.Discard, Stderr: io.Discard, Ready: ready})
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("api exited: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})

	roots := x509.NewCertPool()
	roots.AddCert(ca)
	client := func(cert, key *pem.Block) *http.Client {
		cfg := &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}
		if cert != nil {
			pair, err := tls.X509KeyPair(pem.EncodeToMemory(cert), pem.EncodeToMemory(key))
			require.NoError(t, err)
			// Sent whatever CAs the server names (Go's client would
			// otherwise send none of another CA's).
			cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
		}
		return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
	}
	get := func(c *http.Client, path, authz string) (int, string, error) {
		req, err := http.NewRequest(http.MethodGet, "https://"+addr+path, nil)
		require.NoError(t, err)
		if authz != "" {
			req.Header.Set("Authorization", authz)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	token := "Bearer " + mintToken(t, testSecret, "executor-1", auth.ScopeSchedulesRead)

	code, body, err := get(client(nil, nil), "/schedules", token)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, code)
	require.Contains(t, body, "a client certificate signed by TLS_CLIENT_CA_FILE is required")
	code, _, err = get(client(nil, nil), "/healthz", "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)

	_, _, err = get(client(strangerCert, strangerKey), "/schedules", token)
	require.Error(t, err, "a certificate of another CA is refused in the handshake")

	code, _, err = get(client(clientCert, clientKey), "/schedules", "")
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, code, "mTLS is transport: the token is still needed")
	code, body, err = get(client(clientCert, clientKey), "/schedules", token)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, body)
}

func newCA(t *testing.T, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return cert, key
}

func leaf(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, name string, server bool) (*pem.Block, *pem.Block) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return &pem.Block{Type: "CERTIFICATE", Bytes: der}, &pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}
}
