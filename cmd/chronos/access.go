package main

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"golang.org/x/time/rate"

	"github.com/chronos-sched/chronos/api"
	"github.com/chronos-sched/chronos/api/auth"
)

// AuthOpts are the settings of who may call chronos's HTTP server.
type AuthOpts struct {
	JWTSecret    string `name:"auth-jwt-secret" env:"AUTH_JWT_SECRET" help:"HS256 secret (32 bytes or more) that verifies API tokens, and signs them in 'chronos token'. Prefer the environment to the flag (ps shows flags)."`
	JWTPublicKey string `name:"auth-jwt-public-key" env:"AUTH_JWT_PUBLIC_KEY" help:"Ed25519 or RSA public key that verifies API tokens (EdDSA, RS256): PEM text or a file path. Instead of AUTH_JWT_SECRET."`
	JWTIssuer    string `name:"auth-jwt-issuer" env:"AUTH_JWT_ISSUER" help:"When set, a token's iss must equal it."`
	JWTAudience  string `name:"auth-jwt-audience" env:"AUTH_JWT_AUDIENCE" help:"When set, a token's aud must include it."`
	Insecure     bool   `name:"insecure" env:"INSECURE" help:"Serve the API without authentication (anyone who reaches it can change and delete schedules); logged as a warning every minute. 'api' and 'all' refuse to start open without it."`

	RateLimit float64 `name:"rate-limit" env:"RATE_LIMIT" default:"50" help:"Requests per second each client may make (a client is a token's subject, or an IP address before authentication); 0 turns the limit off. Over it: 429 with Retry-After."`
	RateBurst int     `name:"rate-burst" env:"RATE_BURST" default:"100" help:"Requests a client may make at once above RATE_LIMIT."`

	TLSCertFile     string `name:"tls-cert-file" env:"TLS_CERT_FILE" help:"Serve HTTPS with this certificate (PEM); needs TLS_KEY_FILE."`
	TLSKeyFile      string `name:"tls-key-file" env:"TLS_KEY_FILE" help:"Private key (PEM) of TLS_CERT_FILE."`
	TLSClientCAFile string `name:"tls-client-ca-file" env:"TLS_CLIENT_CA_FILE" help:"Require client certificates signed by these CAs (PEM) on every route but /healthz and /readyz (mTLS). Transport only: the API still needs a token."`

	MetricsAddr string `name:"metrics-addr" env:"METRICS_ADDR" help:"Serve /metrics (and /debug/pprof/ with PPROF) on this address, without authentication, instead of on HTTP_ADDR behind a token of scope admin. Bind it to an internal interface."`
}

// access is how the HTTP server of one process lets callers in.
type access struct {
	verifier *auth.Verifier // nil: open
	tls      *tls.Config    // nil: plain HTTP
	mtls     bool           // client certificates required
	// owner verifies the alarms' tokens on an open API (chronos dev),
	// with a secret made at start; devToken is a token it accepts, of
	// DevDID, printed for the user.
	owner    *auth.Verifier
	devToken string
}

// DevDID is the demo agent of chronos dev's printed token.
const DevDID = "did:matrix:dev-user:dev"

// devTokenTTL is how long chronos dev's printed token lasts; the secret
// is new at each start, so a restart invalidates it anyway.
const devTokenTTL = 7 * 24 * time.Hour

// devOwnerAccess makes chronos dev's secret for the alarms' tokens (the
// alarms need an owner even on an open API) and a token of DevDID.
func devOwnerAccess() (*auth.Verifier, string, error) {
	secret := []byte(rand.Text() + rand.Text()) // 52 base32 characters: 260 random bits
	v, err := auth.NewVerifier(auth.Config{Secret: secret})
	if err != nil {
		return nil, "", err
	}
	tok, err := auth.Mint(auth.Grant{Subject: DevDID, TTL: devTokenTTL}, secret, nil)
	return v, tok, err
}

// printDevToken tells the user of chronos dev how to call the alarms: the
// demo DID's token and a curl line creating an alarm.
func printDevToken(w io.Writer, addr, token string) {
	fmt.Fprintf(w, `chronos dev: the alarms (/v1/alarms) need an agent's token, even here. One for the demo agent %s,
valid for %d days or until chronos dev restarts (its secret is made at start; set AUTH_JWT_SECRET to keep one):

  export CHRONOS_TOKEN=%s
  curl -s -X POST http://%s/v1/alarms -H "Authorization: Bearer $CHRONOS_TOKEN" -H 'Content-Type: application/json' \
    -d '{"kind":"once","delay_seconds":60,"label":"demo","wake_message":"one minute has passed","payload":{"step":1}}'
  curl -s http://%s/v1/alarms -H "Authorization: Bearer $CHRONOS_TOKEN"

`, DevDID, int(devTokenTTL.Hours()/24), token, addr, addr)
}

// verifier builds the token verifier, nil when no key is configured.
func (o AuthOpts) verifier() (*auth.Verifier, error) {
	cfg := auth.Config{Secret: []byte(o.JWTSecret), Issuer: o.JWTIssuer, Audience: o.JWTAudience}
	if o.JWTPublicKey != "" {
		pub, err := auth.ParsePublicKey("AUTH_JWT_PUBLIC_KEY", o.JWTPublicKey)
		if err != nil {
			return nil, err
		}
		cfg.PublicKey = pub
	}
	if cfg.PublicKey == nil && len(cfg.Secret) == 0 {
		if o.JWTIssuer != "" || o.JWTAudience != "" {
			return nil, errors.New("AUTH_JWT_ISSUER and AUTH_JWT_AUDIENCE need AUTH_JWT_SECRET or AUTH_JWT_PUBLIC_KEY")
		}
		return nil, nil
	}
	return auth.NewVerifier(cfg)
}

// errNoAuth is why api and all refuse to start open.
var errNoAuth = errors.New("the API has no authentication configured: set AUTH_JWT_SECRET (an HS256 secret of 32 bytes or more, e.g. `openssl rand -hex 32`) " +
	"or AUTH_JWT_PUBLIC_KEY (Ed25519 or RSA, PEM or a path), and mint tokens with `chronos token`; " +
	"or start with --insecure (INSECURE=true) to serve it open to anyone who reaches it")

// setupAccess decides how p's HTTP server lets callers in, refusing an
// open API unless p is dev on loopback or INSECURE is set.
func (p processSpec) setupAccess(logger *slog.Logger) (access, error) {
	o := p.common.AuthOpts
	var a access
	v, err := o.verifier()
	if err != nil {
		return a, err
	}
	a.verifier = v
	if a.tls, err = o.tlsConfig(); err != nil {
		return a, err
	}
	a.mtls = o.TLSClientCAFile != ""
	if v != nil || p.api == nil {
		return a, nil // scheduler and launcher serve only probes and /metrics
	}
	switch {
	case o.Insecure:
		logger.Warn(insecureWarning, "http_addr", p.common.HTTPAddr)
	case p.dev && isLoopback(p.common.HTTPAddr):
		logger.Warn("chronos dev: the API is open, without authentication, on loopback only; set AUTH_JWT_SECRET to require tokens",
			"http_addr", p.common.HTTPAddr)

	case p.dev:
		return a, fmt.Errorf("chronos dev serves the API open, so only on loopback: HTTP_ADDR=%s is not a loopback address; "+
			"use 127.0.0.1, set AUTH_JWT_SECRET, or start with --insecure (INSECURE=true)", p.common.HTTPAddr)
	default:
		return a, errNoAuth
	}
	if p.dev {
		a.owner, a.devToken, err = devOwnerAccess()
	}
	return a, err
}

const insecureWarning = "INSECURE: the API is open, without authentication: anyone who reaches it can change, trigger and delete schedules and forge run statuses"

// warnInsecure repeats the warning each minute while the API runs open.
func warnInsecure(ctx context.Context, logger *slog.Logger, addr string) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			logger.Warn(insecureWarning, "http_addr", addr)
		}
	}
}

// isLoopback reports whether addr's host is a loopback address or
// localhost; an empty host listens on every interface.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// apiConfig fills cfg's access settings.
func (a access) apiConfig(cfg *api.Config, o AuthOpts) {
	cfg.Auth, cfg.Open = a.verifier, a.verifier == nil
	if a.verifier == nil {
		cfg.OwnerAuth = a.owner // nil but in chronos dev: the alarms answer 401
	}
	cfg.RateLimit, cfg.RateBurst = rate.Limit(o.RateLimit), o.RateBurst
	if o.RateLimit == 0 {
		cfg.RateLimit = rate.Inf
	}
}

// tlsConfig loads the server certificate and, for mTLS, the client CAs.
func (o AuthOpts) tlsConfig() (*tls.Config, error) {
	switch {
	case o.TLSCertFile == "" && o.TLSKeyFile == "" && o.TLSClientCAFile == "":
		return nil, nil
	case o.TLSCertFile == "" || o.TLSKeyFile == "":
		return nil, errors.New("TLS needs both TLS_CERT_FILE and TLS_KEY_FILE (TLS_CLIENT_CA_FILE needs them too)")
	}
	cert, err := tls.LoadX509KeyPair(o.TLSCertFile, o.TLSKeyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS_CERT_FILE/TLS_KEY_FILE: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if o.TLSClientCAFile != "" {
		pem, err := os.ReadFile(o.TLSClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("TLS_CLIENT_CA_FILE: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS_CLIENT_CA_FILE %s: no PEM certificate found", o.TLSClientCAFile)
		}
		cfg.ClientCAs = pool
		// A certificate, when given, must verify; requireClientCert
		// refuses requests without one except the probes, which a
		// platform's health checker sends without a certificate.
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return cfg, nil
}

// requireClientCert answers 401 to a request without a verified client
// certificate, but for the probes.
func requireClientCert(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" && r.URL.Path != "/readyz" && (r.TLS == nil || len(r.TLS.VerifiedChains) == 0) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":{"code":"`+api.CodeUnauthenticated+`","message":"a client certificate signed by TLS_CLIENT_CA_FILE is required"}}`)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// TokenCmd mints an API token.
type TokenCmd struct {
	Sub      string        `name:"sub" required:"" help:"The caller: a service's name, or an agent's DID (did:matrix:<user_id>:<keyfp>)."`
	Scope    string        `name:"scope" required:"" help:"Space- or comma-separated scopes: schedules:read, schedules:write, runs:write, admin."`
	TTL      time.Duration `name:"ttl" default:"24h" help:"Lifetime of the token."`
	Secret   string        `name:"auth-jwt-secret" env:"AUTH_JWT_SECRET" help:"HS256 secret to sign with (the API's)."`
	Key      string        `name:"auth-jwt-private-key" env:"AUTH_JWT_PRIVATE_KEY" help:"Ed25519 or RSA private key to sign with instead (PEM text or a path); the API verifies with its public key."`
	Issuer   string        `name:"auth-jwt-issuer" env:"AUTH_JWT_ISSUER" help:"iss of the token."`
	Audience string        `name:"auth-jwt-audience" env:"AUTH_JWT_AUDIENCE" help:"aud of the token."`
}

// Run prints a signed token.
func (c *TokenCmd) Run(env *Env) error {
	scopes, err := auth.ParseScopes(c.Scope)
	if err != nil {
		return err
	}
	key, err := signingKey(c.Secret, c.Key,
		errors.New("chronos token signs with AUTH_JWT_SECRET (HS256) or AUTH_JWT_PRIVATE_KEY (Ed25519 or RSA): set one"))
	if err != nil {
		return err
	}
	tok, err := auth.Mint(auth.Grant{Subject: c.Sub, Scopes: scopes, TTL: c.TTL, Issuer: c.Issuer, Audience: c.Audience},
		[]byte(c.Secret), key)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(env.Stdout, tok)
	return err
}

// signingKey is the private key that signs minted tokens, or nil when
// the HS256 secret does; missing is the error when neither is set.
func signingKey(secret, privateKey string, missing error) (crypto.Signer, error) {
	switch {
	case privateKey != "" && secret != "":
		return nil, errors.New("set one of AUTH_JWT_SECRET and AUTH_JWT_PRIVATE_KEY, not both")
	case privateKey != "":
		return auth.ParsePrivateKey("AUTH_JWT_PRIVATE_KEY", privateKey)
	case secret == "":
		return nil, missing
	}
	return nil, nil
}

// handler wraps h with the client certificate check under mTLS.
func (a access) handler(h http.Handler) http.Handler {
	if a.mtls {
		return requireClientCert(h)
	}
	return h
}

// serve serves srv on ln, over TLS when configured.
func (a access) serve(srv *http.Server, ln net.Listener) error {
	if a.tls != nil {
		return srv.ServeTLS(ln, "", "") // the certificate is in srv.TLSConfig
	}
	return srv.Serve(ln)
}

// serveMetrics serves /metrics (and pprof with PPROF) on METRICS_ADDR,
// when set, reporting a failure of the server on errs. It returns a
// function that stops it and the address it listens on ("" without
// METRICS_ADDR).
func serveMetrics(c Common, metrics http.Handler, errs chan<- error) (func(), string, error) {
	if c.MetricsAddr == "" {
		return func() {}, "", nil
	}
	ln, err := net.Listen("tcp", c.MetricsAddr)
	if err != nil {
		return nil, "", fmt.Errorf("listen on METRICS_ADDR=%s: %w", c.MetricsAddr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	if c.Pprof {
		mux.Handle("/debug/pprof/", http.DefaultServeMux) // net/http/pprof registers there
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			errs <- fmt.Errorf("metrics server: %w", err)
		}
	}()
	return func() { _ = srv.Close() }, ln.Addr().String(), nil
}
