package api

import (
	"errors"
	"html/template"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/chronos-sched/chronos/api/auth"
)

// sessionCookie carries the dashboard's token after login. It is
// HttpOnly (page scripts cannot read it), SameSite=Strict (no other site
// can make a browser send it, so no cross-site request rides on it),
// scoped to the dashboard's path, Secure over TLS, and expires with its
// token.
const sessionCookie = "chronos_session"

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>chronos dashboard login</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="font-family: sans-serif; max-width: 40em; margin: 4em auto">
<h1>chronos dashboard</h1>
{{if .}}<p role="alert" style="color: #b00">{{.}}</p>{{end}}
<form method="post" action="login">
<p><label for="token">Token (scope schedules:read to look, admin to change tasks and queues)</label></p>
<p><textarea id="token" name="token" rows="6" cols="60" required autofocus></textarea></p>
<p><button type="submit">Log in</button></p>
</form>
<p>Mint one with <code>chronos token --sub you --scope admin --ttl 8h</code>.</p>
</body></html>
`))

// mountLogin serves the dashboard's login form: GET shows it, POST takes
// a token, verifies it and sets the session cookie; POST logout clears
// it.
func (s *server) mountLogin(e *echo.Echo) {
	e.GET(MonitoringPath+"/login", func(c echo.Context) error { return s.renderLogin(c, http.StatusOK, "") })
	e.POST(MonitoringPath+"/login", s.login)
	e.POST(MonitoringPath+"/logout", func(c echo.Context) error {
		c.SetCookie(s.cookie(c, "", time.Unix(0, 0)))
		return c.Redirect(http.StatusSeeOther, MonitoringPath+"/login")
	})
}

func (s *server) renderLogin(c echo.Context, status int, problem string) error {
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().Header().Set("Cache-Control", "no-store")
	c.Response().Header().Set("X-Frame-Options", "DENY")
	c.Response().WriteHeader(status)
	return loginPage.Execute(c.Response(), problem)
}

func (s *server) login(c echo.Context) error {
	if err := s.limit(c, "ip:", clientIP(c.Request())); err != nil {
		return err
	}
	c.Request().Body = http.MaxBytesReader(c.Response(), c.Request().Body, 64<<10)
	token := c.FormValue("token")
	id, err := s.cfg.Auth.Verify(token)
	if err != nil {
		var ae *auth.Error
		msg := "token refused"
		if errors.As(err, &ae) {
			msg = "token refused: " + ae.Reason
		}
		return s.renderLogin(c, http.StatusUnauthorized, msg)
	}
	if !id.Scopes.Has(auth.ScopeSchedulesRead) {
		return s.renderLogin(c, http.StatusForbidden, "token lacks scope schedules:read")
	}
	c.SetCookie(s.cookie(c, token, id.ExpiresAt))
	return c.Redirect(http.StatusSeeOther, MonitoringPath+"/")
}

func (s *server) cookie(c echo.Context, value string, expires time.Time) *http.Cookie {
	return &http.Cookie{
		Name: sessionCookie, Value: value, Path: MonitoringPath, Expires: expires,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.IsTLS(),
	}
}
