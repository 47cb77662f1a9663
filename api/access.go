package api

import (
	"net"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/chronos-sched/chronos/api/auth"
)

// Error codes of refused access.
const (
	CodeUnauthenticated  = "unauthenticated"
	CodePermissionDenied = "permission_denied"
	CodeRateLimited      = "rate_limited"
)

// MonitoringPath is where cmd mounts the asynqmon dashboard; its pages
// accept the login cookie as well as a bearer token.
const MonitoringPath = "/monitoring"

// publicRoutes answer without a token: the probes, and the dashboard's
// login page (which asks for one).
var publicRoutes = map[string]bool{
	"/healthz": true, "/readyz": true,
	MonitoringPath + "/login": true, MonitoringPath + "/logout": true,
}

// ownerRoutes are an agent's own routes: the alarms. They need no scope
// but always a verified token whose subject is a well-formed DID (the
// owner), even when the API runs open (chronos dev, INSECURE): the owner
// is who the alarm belongs to, which an open API cannot tell. A service
// token (a name for subject, with scopes, even admin) is refused there:
// it owns no alarms. guardOwner enforces this before routeScopes is read.
var ownerRoutes = map[string]bool{"/v1/alarms": true, "/v1/alarms/:id": true,
	// The cron tool's jobs are alarms too (crontool.go).
	routeCronTool: true, routeCronSchema: true, routeCronImport: true, routeCronExport: true, routeMCP: true}

// routeScopes is the scope each route needs, by "METHOD pattern". A
// registered route missing here (and from ownerRoutes) needs admin, so a
// new route is closed until someone decides who may call it.
var routeScopes = map[string]auth.Scope{
	"GET /openapi.json":                       auth.ScopeSchedulesRead,
	"GET /v1/preview":                         auth.ScopeSchedulesRead,
	"GET /schedules":                          auth.ScopeSchedulesRead,
	"GET /schedules/:id":                      auth.ScopeSchedulesRead,
	"GET /schedules/:id/runs":                 auth.ScopeSchedulesRead,
	"GET /runs/:idempotency_key":              auth.ScopeSchedulesRead,
	"POST /schedules/upsert":                  auth.ScopeSchedulesWrite,
	"POST /schedules/pause":                   auth.ScopeSchedulesWrite,
	"POST /schedules/:id/backfill":            auth.ScopeSchedulesWrite,
	"POST /runs/:idempotency_key/status":      auth.ScopeRunsWrite,
	"DELETE /schedules/:id":                   auth.ScopeAdmin,
	"POST /run-launcher/start":                auth.ScopeAdmin,
	"PUT /workflows/:id/versions/:version":    auth.ScopeAdmin,
	"GET /workflows/:id/versions/:version":    auth.ScopeAdmin,
	"DELETE /workflows/:id/versions/:version": auth.ScopeAdmin,
	"GET /metrics":                            auth.ScopeAdmin,
}

// scopeFor returns the scope a request to route needs. The dashboard is
// readable with schedules:read and writable only with admin.
func scopeFor(method, route string) auth.Scope {
	if route == MonitoringPath || strings.HasPrefix(route, MonitoringPath+"/") {
		if method == http.MethodGet || method == http.MethodHead {
			return auth.ScopeSchedulesRead
		}
		return auth.ScopeAdmin
	}
	if method == http.MethodHead {
		method = http.MethodGet
	}
	if s, ok := routeScopes[method+" "+route]; ok {
		return s
	}
	return auth.ScopeAdmin
}

// guard authenticates and authorizes every request but the public ones,
// and applies the per-client rate limit, before any handler (and so
// before anything reads Redis). It runs after routing, so it knows the
// route pattern; an unmatched path needs a valid token of any scope
// before it learns that it is a 404.
func (s *server) guard(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		route := c.Path()
		if publicRoutes[route] && s.registered(route) {
			return next(c)
		}
		if ownerRoutes[route] && s.registered(route) {
			return s.guardOwner(c, next)
		}
		if s.cfg.Open {
			if err := s.limit(c, "ip:", clientIP(c.Request())); err != nil {
				return err
			}
			return next(c)
		}
		id, err := s.authenticate(c, route)
		if err != nil {
			if err := s.limit(c, "ip:", clientIP(c.Request())); err != nil {
				return err
			}
			if isDashboardPage(c, route) {
				return c.Redirect(http.StatusSeeOther, MonitoringPath+"/login")
			}
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="chronos"`)
			return &statusError{status: http.StatusUnauthorized, code: CodeUnauthenticated, message: err.Error()}
		}
		if err := s.limit(c, "sub:", id.Subject); err != nil {
			return err
		}
		if s.registered(route) {
			if need := scopeFor(c.Request().Method, route); !id.Scopes.Has(need) {
				return &statusError{status: http.StatusForbidden, code: CodePermissionDenied,
					message: "token of " + id.Subject + " lacks scope " + string(need)}
			}
		}
		req := c.Request()
		c.SetRequest(req.WithContext(auth.WithIdentity(req.Context(), id)))
		return next(c)
	}
}

// guardOwner lets an owner route's request through only with a verified
// bearer token whose subject is a well-formed DID, which it puts in the
// request's context; anything else is a 401 before a handler (and Redis)
// is reached. The token is verified by Auth, or by OwnerAuth when the API
// runs open.
func (s *server) guardOwner(c echo.Context, next echo.HandlerFunc) error {
	id, err := s.authenticateOwner(c)
	if err != nil {
		if err := s.limit(c, "ip:", clientIP(c.Request())); err != nil {
			return err
		}
		c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="chronos"`)
		return &statusError{status: http.StatusUnauthorized, code: CodeUnauthenticated, message: err.Error()}
	}
	if err := s.limit(c, "sub:", id.Subject); err != nil {
		return err
	}
	req := c.Request()
	c.SetRequest(req.WithContext(auth.WithIdentity(req.Context(), id)))
	return next(c)
}

// authenticateOwner verifies an owner route's token and its DID.
func (s *server) authenticateOwner(c echo.Context) (auth.Identity, error) {
	v := s.cfg.Auth
	if v == nil {
		v = s.cfg.OwnerAuth
	}
	if v == nil {
		return auth.Identity{}, errNoOwnerVerifier
	}
	token, err := bearer(c.Request())
	if err != nil {
		return auth.Identity{}, err
	}
	if token == "" {
		return auth.Identity{}, errMissingOwnerToken
	}
	id, err := v.Verify(token)
	if err != nil {
		return auth.Identity{}, err
	}
	if _, err := id.Owner(); err != nil {
		return auth.Identity{}, &auth.Error{Reason: "token sub: " + err.Error() + ": alarms belong to an agent's DID"}
	}
	return id, nil
}

var (
	errNoOwnerVerifier = &auth.Error{Reason: "alarms need a verified token whose sub is the agent's DID, and this server verifies none: " +
		"set AUTH_JWT_SECRET or AUTH_JWT_PUBLIC_KEY"}
	errMissingOwnerToken = &auth.Error{Reason: "missing token: send Authorization: Bearer <token> whose sub is your DID (did:matrix:<user_id>:<keyfp>)"}
)

// authenticate verifies the request's bearer token, or on the dashboard
// its login cookie.
func (s *server) authenticate(c echo.Context, route string) (auth.Identity, error) {
	token, err := bearer(c.Request())
	if err != nil {
		return auth.Identity{}, err
	}
	if token == "" && strings.HasPrefix(route, MonitoringPath) {
		if ck, err := c.Cookie(sessionCookie); err == nil {
			token = ck.Value
		}
	}
	if token == "" {
		return auth.Identity{}, errMissingToken
	}
	return s.cfg.Auth.Verify(token)
}

var (
	errMissingToken = &auth.Error{Reason: "missing token: send Authorization: Bearer <token> (chronos token mints one)"}
	errNotBearer    = &auth.Error{Reason: "Authorization header: want Bearer <token>"}
)

// bearer returns the token of an Authorization: Bearer header, "" when
// there is none.
func bearer(r *http.Request) (string, error) {
	h := r.Header.Get(echo.HeaderAuthorization)
	if h == "" {
		return "", nil
	}
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", errNotBearer
	}
	return strings.TrimSpace(token), nil
}

// isDashboardPage reports a browser's page load of the dashboard, which
// is sent to the login form rather than answered with JSON.
func isDashboardPage(c echo.Context, route string) bool {
	r := c.Request()
	return strings.HasPrefix(route, MonitoringPath) && r.Method == http.MethodGet &&
		strings.Contains(r.Header.Get(echo.HeaderAccept), echo.MIMETextHTML)
}

// clientIP is the peer's address. X-Forwarded-For is not trusted: any
// client could name any address in it and escape its limit.
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
