package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/chronos-sched/chronos/api"
	"github.com/chronos-sched/chronos/api/auth"
)

var (
	testSecret    = []byte("test-secret-test-secret-test-secret!")
	foreignSecret = []byte("another-secret-another-secret-another")
)

// setupAuth serves the API with HS256 tokens of testSecret required.
func setupAuth(t *testing.T, cfg api.Config) *testBundle {
	t.Helper()
	v, err := auth.NewVerifier(auth.Config{Secret: testSecret})
	require.NoError(t, err)
	cfg.Auth = v
	b := setup(t, setupOpts{cfg: &cfg})
	// What cmd mounts after New: the dashboard and /metrics.
	dash := func(c echo.Context) error { return c.String(http.StatusOK, "dashboard "+c.Request().Method) }
	b.e.Any(api.MonitoringPath, dash)
	b.e.Any(api.MonitoringPath+"/*", dash)
	b.e.GET("/metrics", func(c echo.Context) error { return c.String(http.StatusOK, "metrics") })
	return b
}

func token(t *testing.T, secret []byte, sub string, ttl time.Duration, scopes ...auth.Scope) string {
	t.Helper()
	g := auth.Grant{Subject: sub, Scopes: scopes, TTL: ttl}
	if ttl < 0 {
		g.TTL, g.IssuedAt = time.Minute, time.Now().Add(-time.Hour)
	}
	tok, err := auth.Mint(g, secret, nil)
	require.NoError(t, err)
	return tok
}

// doAuth serves one request with an Authorization header (none when
// authz is "") and a JSON body for writes.
func (b *testBundle) doAuth(t *testing.T, method, path, authz string) *httptest.ResponseRecorder {
	t.Helper()
	var body *strings.Reader
	if method == http.MethodPost || method == http.MethodPut {
		body = strings.NewReader("{}")
	} else {
		body = strings.NewReader("")
	}
	req := httptest.NewRequest(method, path, body)
	req.Header.Set("Content-Type", "application/json")
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	rec := httptest.NewRecorder()
	b.e.ServeHTTP(rec, req)
	return rec
}

var param = regexp.MustCompile(`:[a-z_]+|\*`)

// protectedRoutes lists every registered route but the open ones, with a
// concrete path.
func protectedRoutes(b *testBundle) [][2]string {
	var out [][2]string
	for _, r := range b.e.Routes() {
		switch {
		case r.Method == echo.RouteNotFound, r.Path == "/healthz", r.Path == "/readyz",
			strings.HasPrefix(r.Path, api.MonitoringPath+"/log"):
			continue
		}
		out = append(out, [2]string{r.Method, param.ReplaceAllString(r.Path, "x")})
	}
	slices.SortFunc(out, func(a, b [2]string) int { return strings.Compare(a[0]+a[1], b[0]+b[1]) })
	return slices.Compact(out)
}

// Every route but the probes refuses a request without a valid token
// with 401, before anything reads or writes Redis.
func TestAccessUnauthenticated(t *testing.T) {
	t.Parallel()
	b := setupAuth(t, api.Config{RateLimit: rate.Inf})
	ctx := context.Background()
	before := b.keys(t)
	require.NoError(t, b.rdb.ConfigResetStat(ctx).Err())

	routes := protectedRoutes(b)
	require.GreaterOrEqual(t, len(routes), 14, "routes: %v", routes)
	for _, r := range routes {
		for name, authz := range map[string]string{
			"missing":   "",
			"expired":   "Bearer " + token(t, testSecret, "ops", -1, auth.ScopeAdmin),
			"foreign":   "Bearer " + token(t, foreignSecret, "ops", time.Hour, auth.ScopeAdmin),
			"malformed": "Bearer abc.def.ghi",
			"basic":     "Basic b3BzOnB3",
		} {
			rec := b.doAuth(t, r[0], r[1], authz)
			msg := requireError(t, rec, http.StatusUnauthorized, api.CodeUnauthenticated, "")
			require.NotEmpty(t, msg.Message, "%s %s %s", name, r[0], r[1])
			require.Equal(t, `Bearer realm="chronos"`, rec.Header().Get("WWW-Authenticate"))
		}
	}
	// An unknown path does not tell a stranger it is unknown.
	requireError(t, b.doAuth(t, http.MethodGet, "/nowhere", ""), http.StatusUnauthorized, api.CodeUnauthenticated, "missing token")
	requireError(t, b.doAuth(t, http.MethodGet, "/schedules/x", "Bearer "+token(t, testSecret, "ops", -1, auth.ScopeAdmin)),
		http.StatusUnauthorized, api.CodeUnauthenticated, "token is expired")
	requireError(t, b.doAuth(t, http.MethodGet, "/schedules/x", "Bearer "+token(t, foreignSecret, "ops", time.Hour, auth.ScopeAdmin)),
		http.StatusUnauthorized, api.CodeUnauthenticated, "token signature is invalid")

	// Redis saw nothing but this test's own INFO.
	stats, err := b.rdb.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(stats, "\n") {
		if strings.HasPrefix(line, "cmdstat_") {
			require.Regexp(t, `^cmdstat_(config\|resetstat|info):`, line)
		}
	}
	require.Equal(t, before, b.keys(t))

	// The probes stay open.
	require.Equal(t, http.StatusOK, b.doAuth(t, http.MethodGet, "/healthz", "").Code)
	require.Equal(t, http.StatusOK, b.doAuth(t, http.MethodGet, "/readyz", "").Code)
}

// Each route needs its scope: every other scope but admin gets 403, and
// the right one (or admin) gets past the guard.
func TestAccessScopes(t *testing.T) {
	t.Parallel()
	b := setupAuth(t, api.Config{RateLimit: rate.Inf})
	want := map[string]auth.Scope{
		"GET /openapi.json":           auth.ScopeSchedulesRead,
		"GET /v1/preview":             auth.ScopeSchedulesRead,
		"GET /schedules":              auth.ScopeSchedulesRead,
		"GET /schedules/x":            auth.ScopeSchedulesRead,
		"GET /schedules/x/runs":       auth.ScopeSchedulesRead,
		"GET /runs/x":                 auth.ScopeSchedulesRead,
		"POST /schedules/upsert":      auth.ScopeSchedulesWrite,
		"POST /schedules/pause":       auth.ScopeSchedulesWrite,
		"POST /schedules/x/backfill":  auth.ScopeSchedulesWrite,
		"POST /runs/x/status":         auth.ScopeRunsWrite,
		"DELETE /schedules/x":         auth.ScopeAdmin,
		"POST /run-launcher/start":    auth.ScopeAdmin,
		"PUT /workflows/x/versions/x": auth.ScopeAdmin,
		"GET /workflows/x/versions/x": auth.ScopeAdmin,
		"GET /metrics":                auth.ScopeAdmin,
		"GET /monitoring/x":           auth.ScopeSchedulesRead,
		"POST /monitoring/x":          auth.ScopeAdmin,
		"DELETE /monitoring/x":        auth.ScopeAdmin,
	}
	for _, r := range protectedRoutes(b) {
		key := r[0] + " " + r[1]
		if ownerRoute(r[1]) {
			continue // owner routes: a DID's token, no scope (alarms_test.go, crontool_test.go)
		}
		need, ok := want[key]
		if strings.HasPrefix(r[1], api.MonitoringPath) {
			// The dashboard: readable with schedules:read, writable with admin.
			need, ok = auth.ScopeAdmin, true
			if r[0] == http.MethodGet || r[0] == http.MethodHead {
				need = auth.ScopeSchedulesRead
			}
		}
		if !ok {
			need = auth.ScopeAdmin // a route nobody classified is admin-only
		}
		for _, s := range auth.KnownScopes {
			tok := "Bearer " + token(t, testSecret, "svc-"+string(s), time.Hour, s)
			rec := b.doAuth(t, r[0], r[1], tok)
			if s == need || s == auth.ScopeAdmin {
				require.NotContains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, rec.Code,
					"%s with %s: %s", key, s, rec.Body.String())
				continue
			}
			requireError(t, rec, http.StatusForbidden, api.CodePermissionDenied,
				"token of svc-"+string(s)+" lacks scope "+string(need))
		}
	}
	// A token with no scope at all reads nothing.
	requireError(t, b.doAuth(t, http.MethodGet, "/schedules", "Bearer "+token(t, testSecret, "nobody", time.Hour)),
		http.StatusForbidden, api.CodePermissionDenied, "token of nobody lacks scope schedules:read")
}

// A token's identity reaches the handlers, and writes work end to end
// with the right scopes.
func TestAccessWrites(t *testing.T) {
	t.Parallel()
	b := setupAuth(t, api.Config{RateLimit: rate.Inf})
	writer := "Bearer " + token(t, testSecret, "deployer", time.Hour, auth.ScopeSchedulesWrite, auth.ScopeSchedulesRead)
	req := httptest.NewRequest(http.MethodPost, "/schedules/upsert", strings.NewReader(`{"schedule_id":"s1","workflow_id":"wf","version":1,"user_id":"u","cron_expr":"0 9 * * *"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", writer)
	rec := httptest.NewRecorder()
	b.e.ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, http.StatusOK, b.doAuth(t, http.MethodGet, "/schedules/s1", writer).Code)
	requireError(t, b.doAuth(t, http.MethodDelete, "/schedules/s1", writer), http.StatusForbidden, api.CodePermissionDenied, "")
	admin := "Bearer " + token(t, testSecret, "ops", time.Hour, auth.ScopeAdmin)
	require.Equal(t, http.StatusNoContent, b.doAuth(t, http.MethodDelete, "/schedules/s1", admin).Code)

	// The identity is in the request's context.
	var got auth.Identity
	b.e.GET("/whoami", func(c echo.Context) error {
		got, _ = auth.FromContext(c.Request().Context())
		return c.NoContent(http.StatusNoContent)
	})
	did := "did:matrix:6f1c2a4e:ab12"
	require.Equal(t, http.StatusNoContent, b.doAuth(t, http.MethodGet, "/whoami", "Bearer "+token(t, testSecret, did, time.Hour, auth.ScopeAdmin)).Code)
	require.Equal(t, did, got.Subject)
	owner, err := got.Owner()
	require.NoError(t, err)
	require.Equal(t, "6f1c2a4e", owner.UserID)
}

func TestAccessRateLimit(t *testing.T) {
	t.Parallel()
	b := setupAuth(t, api.Config{RateLimit: 0.5, RateBurst: 2})
	a := "Bearer " + token(t, testSecret, "a", time.Hour, auth.ScopeSchedulesRead)
	for range 2 {
		require.Equal(t, http.StatusOK, b.doAuth(t, http.MethodGet, "/v1/preview?cron_expr=*+*+*+*+*", a).Code)
	}
	rec := b.doAuth(t, http.MethodGet, "/v1/preview?cron_expr=*+*+*+*+*", a)
	requireError(t, rec, http.StatusTooManyRequests, api.CodeRateLimited, "too many requests")
	secs, err := strconv.Atoi(rec.Header().Get("Retry-After"))
	require.NoError(t, err)
	require.True(t, secs >= 1 && secs <= 2, "Retry-After %d", secs)
	// Another subject has its own bucket, even from the same address.
	other := "Bearer " + token(t, testSecret, "b", time.Hour, auth.ScopeSchedulesRead)
	require.Equal(t, http.StatusOK, b.doAuth(t, http.MethodGet, "/v1/preview?cron_expr=*+*+*+*+*", other).Code)
	// Strangers are limited by address: the third is refused.
	for range 2 {
		require.Equal(t, http.StatusUnauthorized, b.doAuth(t, http.MethodGet, "/schedules", "").Code)
	}
	requireError(t, b.doAuth(t, http.MethodGet, "/schedules", ""), http.StatusTooManyRequests, api.CodeRateLimited, "")
	// The probes are never limited.
	for range 5 {
		require.Equal(t, http.StatusOK, b.doAuth(t, http.MethodGet, "/healthz", "").Code)
	}
}

// The dashboard sends a browser without a session to its login form,
// takes a token there into an HttpOnly, SameSite=Strict cookie, and is
// writable only with admin.
func TestAccessDashboardLogin(t *testing.T) {
	t.Parallel()
	b := setupAuth(t, api.Config{RateLimit: rate.Inf})
	serve := func(method, path, cookie, form string, accept string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(form))
		if form != "" {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		rec := httptest.NewRecorder()
		b.e.ServeHTTP(rec, req)
		return rec
	}

	// Refused without login: a page load goes to the form, a call gets 401.
	rec := serve(http.MethodGet, "/monitoring/", "", "", "text/html,application/xhtml+xml")
	require.Equal(t, http.StatusSeeOther, rec.Code)
	require.Equal(t, "/monitoring/login", rec.Header().Get("Location"))
	requireError(t, serve(http.MethodGet, "/monitoring/api/queues", "", "", "application/json"), http.StatusUnauthorized, api.CodeUnauthenticated, "missing token")
	requireError(t, serve(http.MethodDelete, "/monitoring/api/queues/q", "", "", ""), http.StatusUnauthorized, api.CodeUnauthenticated, "")

	rec = serve(http.MethodGet, "/monitoring/login", "", "", "text/html")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), `<form method="post" action="login">`)

	// A bad token is refused on the form.
	rec = serve(http.MethodPost, "/monitoring/login", "", url.Values{"token": {token(t, foreignSecret, "ops", time.Hour, auth.ScopeAdmin)}}.Encode(), "")
	require.Equal(t, http.StatusUnauthorized, rec.Code)
	require.Contains(t, rec.Body.String(), "token refused: token signature is invalid")
	require.Empty(t, rec.Result().Cookies())
	rec = serve(http.MethodPost, "/monitoring/login", "", url.Values{"token": {token(t, testSecret, "exec", time.Hour, auth.ScopeRunsWrite)}}.Encode(), "")
	require.Equal(t, http.StatusForbidden, rec.Code)

	login := func(scopes ...auth.Scope) string {
		rec := serve(http.MethodPost, "/monitoring/login", "", url.Values{"token": {token(t, testSecret, "viewer", time.Hour, scopes...)}}.Encode(), "")
		require.Equal(t, http.StatusSeeOther, rec.Code, rec.Body.String())
		require.Equal(t, "/monitoring/", rec.Header().Get("Location"))
		cookies := rec.Result().Cookies()
		require.Len(t, cookies, 1)
		c := cookies[0]
		require.True(t, c.HttpOnly)
		require.Equal(t, http.SameSiteStrictMode, c.SameSite)
		require.Equal(t, "/monitoring", c.Path)
		require.WithinDuration(t, time.Now().Add(time.Hour), c.Expires, time.Minute)
		return c.Name + "=" + c.Value
	}
	viewer := login(auth.ScopeSchedulesRead)
	rec = serve(http.MethodGet, "/monitoring/", viewer, "", "text/html")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "dashboard GET", rec.Body.String())
	requireError(t, serve(http.MethodDelete, "/monitoring/api/queues/q", viewer, "", ""), http.StatusForbidden, api.CodePermissionDenied, "token of viewer lacks scope admin")
	// The cookie opens the dashboard only, not the API.
	requireError(t, serve(http.MethodGet, "/schedules", viewer, "", ""), http.StatusUnauthorized, api.CodeUnauthenticated, "missing token")

	admin := login(auth.ScopeAdmin)
	rec = serve(http.MethodDelete, "/monitoring/api/queues/q", admin, "", "")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "dashboard DELETE", rec.Body.String())

	rec = serve(http.MethodPost, "/monitoring/logout", admin, "", "")
	require.Equal(t, http.StatusSeeOther, rec.Code)
	require.Len(t, rec.Result().Cookies(), 1)
	require.Empty(t, rec.Result().Cookies()[0].Value)
}

// Open access is a choice: a Config that makes none is refused.
func TestAccessOpenIsExplicit(t *testing.T) {
	t.Parallel()
	b := setup(t) // open: the handlers' tests
	for _, cfg := range []*api.Config{nil, {}} {
		_, err := api.New(b.store, cfg, nil, nil)
		require.ErrorContains(t, err, "api: Config needs Auth (a token verifier) or Open")
	}
	v, err := auth.NewVerifier(auth.Config{Secret: testSecret})
	require.NoError(t, err)
	_, err = api.New(b.store, &api.Config{Auth: v, Open: true}, nil, nil)
	require.ErrorContains(t, err, "both Auth and Open")
	require.Equal(t, http.StatusOK, b.doAuth(t, http.MethodGet, "/schedules", "").Code)
}

// ownerRoute reports whether path is an agent's own route: the alarms
// and the cron tool, whose jobs are alarms.
func ownerRoute(path string) bool {
	return strings.HasPrefix(path, "/v1/alarms") || strings.HasPrefix(path, "/v1/tools/cron") || path == "/mcp"
}

// The OpenAPI document states each operation's scope as the guard
// enforces it.
func TestOpenAPIScopes(t *testing.T) {
	t.Parallel()
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(api.OpenAPI(), &doc))
	b := setupAuth(t, api.Config{RateLimit: rate.Inf})
	n := 0
	for path, ops := range doc.Paths {
		for method, raw := range ops {
			if method == "parameters" {
				continue
			}
			var op struct {
				Scope    string `json:"x-required-scope"`
				Security *[]any `json:"security"`
				Owner    bool   `json:"x-owner-route"`
			}
			require.NoError(t, json.Unmarshal(raw, &op), "%s %s", method, path)
			if op.Owner {
				// A DID's token, whatever its scopes (alarms_test.go).
				require.Empty(t, op.Scope, "%s %s", method, path)
				require.True(t, ownerRoute(path), path)
				continue
			}
			if path == "/healthz" || path == "/readyz" {
				require.NotNil(t, op.Security, path)
				require.Empty(t, *op.Security, path)
				continue
			}
			n++
			concrete := regexp.MustCompile(`\{[a-z_]+\}`).ReplaceAllString(path, "x")
			m := strings.ToUpper(method)
			for _, s := range auth.KnownScopes {
				rec := b.doAuth(t, m, concrete, "Bearer "+token(t, testSecret, "s", time.Hour, s))
				allowed := s == auth.Scope(op.Scope) || s == auth.ScopeAdmin
				require.Equal(t, allowed, rec.Code != http.StatusForbidden, "%s %s with %s: %d", m, path, s, rec.Code)
			}
		}
	}
	require.GreaterOrEqual(t, n, 13)
}
