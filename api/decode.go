package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/chronos-sched/chronos/model"
)

// readBody reads the whole request body, at most BodyLimit bytes, within
// BodyReadTimeout. The server has no ReadTimeout (it would cut long
// responses such as pprof's), so without this deadline a client trickling
// a body would hold its connection and handler for as long as it liked.
func (s *server) readBody(c echo.Context) ([]byte, error) {
	if err := requireJSON(c); err != nil {
		return nil, err
	}
	// guardBody (guard.go) has set the same deadline on a body it
	// guards, and lifts it at the body's end: a second pair of timer
	// changes per request was 2% of an upsert's CPU.
	if g, ok := c.Request().Body.(*guardedBody); !ok || !g.deadline {
		rc := http.NewResponseController(c.Response())
		if err := rc.SetReadDeadline(time.Now().Add(s.cfg.BodyReadTimeout)); err == nil {
			// Lifted once the body is in: net/http's read for a client
			// hang-up would fail at the deadline and cancel the request.
			defer rc.SetReadDeadline(time.Time{})
		}
	}
	b, err := io.ReadAll(http.MaxBytesReader(c.Response(), c.Request().Body, s.cfg.BodyLimit))
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return nil, err
		case errors.Is(err, os.ErrDeadlineExceeded):
			// Closed after the reply: net/http would otherwise wait,
			// with no deadline, for the rest of the body to reuse it.
			c.Response().Header().Set(echo.HeaderConnection, "close")
			return nil, &statusError{status: http.StatusRequestTimeout, code: CodeRequestTimeout,
				message: fmt.Sprintf("body: not received within %s", s.cfg.BodyReadTimeout)}
		}
		return nil, fieldError("body", "could not be read: %v", err)
	}
	return b, nil
}

// requireJSON refuses a body not declared application/json with a 415. A
// web page can make a browser send a text/plain, form or multipart body
// to any address without asking it first (no CORS preflight), but never
// an application/json one: so a page on the network cannot create, pause
// or trigger anything through a browser.
func requireJSON(c echo.Context) error {
	ct := c.Request().Header.Get(echo.HeaderContentType)
	if ct == echo.MIMEApplicationJSON {
		return nil // what clients send, accepted without ParseMediaType's map
	}
	if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == echo.MIMEApplicationJSON {
		return nil
	}
	got := "none"
	if ct != "" {
		got = strconv.Quote(ct[:min(len(ct), 100)])
	}
	return &statusError{status: http.StatusUnsupportedMediaType, code: CodeUnsupportedMedia,
		message: "Content-Type: must be application/json, got " + got}
}

// isJSONObject reports whether b is one well-formed JSON object.
func isJSONObject(b []byte) bool {
	t := bytes.TrimSpace(b)
	return len(t) > 0 && t[0] == '{' && json.Valid(t)
}

// object is a request body decoded one field at a time, so that each
// error names its field and null means absent.
type object map[string]json.RawMessage

// unknown reports each field of o not in known, with the known field it
// most likely misspells: a typo must not leave a setting at its default.
func (o object) unknown(known ...string) error {
	all := true
	for k := range o {
		if all = slices.Contains(known, k); !all {
			break
		}
	}
	if all {
		return nil // the common case, without the list of names
	}
	names := make([]string, 0, len(o))
	for k := range o {
		if !slices.Contains(known, k) {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	var errs model.FieldErrors
	for _, k := range names {
		errs.Add(&model.UnknownFieldError{Field: k, Suggestion: model.SuggestField(k, known)})
	}
	return errs.Err()
}

// keep returns a function that passes a decoded value through and adds
// its error, if any, to errs: a handler goes on decoding after a bad
// field so that its answer names every bad field at once.
func keep[T any](errs *model.FieldErrors) func(T, error) T {
	return func(v T, err error) T {
		errs.Add(err)
		return v
	}
}

// readObject reads a JSON object body.
func (s *server) readObject(c echo.Context) (object, error) {
	b, err := s.readBody(c)
	if err != nil {
		return nil, err
	}
	t := bytes.TrimSpace(b)
	if len(t) == 0 {
		return nil, fieldError("body", "is empty, want a JSON object")
	}
	if t[0] != '{' {
		return nil, fieldError("body", "must be a JSON object")
	}
	if o, ok := flatObject(t); ok {
		return o, nil
	}
	var o object
	if err := json.Unmarshal(t, &o); err != nil {
		return nil, fieldError("body", "invalid JSON: %v", err)
	}
	return o, nil
}

// raw returns a field's value, or nil when it is absent or null.
func (o object) raw(name string) json.RawMessage {
	v, ok := o[name]
	if !ok || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		return nil
	}
	return v
}

// str returns a string field; "" when absent.
func (o object) str(name string) (string, error) {
	v := o.raw(name)
	if v == nil {
		return "", nil
	}
	if s, ok := plainString(v); ok {
		return s, nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", fieldError(name, "must be a string")
	}
	// encoding/json turns invalid UTF-8, raw or as a lone surrogate
	// escape ("\ud800"), into U+FFFD without an error: refused here, as
	// in a path, rather than stored rewritten.
	if !utf8.Valid(v) || (strings.ContainsRune(s, utf8.RuneError) && !bytes.Contains(v, []byte("\uFFFD")) &&
		!bytes.Contains(bytes.ToLower(v), []byte(`\ufffd`))) {
		return "", fieldError(name, "must be valid UTF-8")
	}
	return s, nil
}

// plainString is a JSON string without escapes, which is its bytes
// between the quotes, when they are valid UTF-8 and hold no control
// character (JSON allows none unescaped); ok is false for anything else,
// which json.Unmarshal decodes. Most fields are such strings, and
// json.Unmarshal's reflection for each was 5% of an upsert's CPU.
func plainString(v json.RawMessage) (string, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false
	}
	in := v[1 : len(v)-1]
	for _, b := range in {
		if b < 0x20 || b == '"' || b == '\\' {
			return "", false
		}
	}
	if !utf8.Valid(in) {
		return "", false
	}
	return string(in), true
}

// boolean returns a boolean field; nil when absent.
func (o object) boolean(name string) (*bool, error) {
	v := o.raw(name)
	if v == nil {
		return nil, nil
	}
	var b bool
	if err := json.Unmarshal(v, &b); err != nil {
		return nil, fieldError(name, "must be a boolean")
	}
	return &b, nil
}

// integer returns an integer field; nil when absent.
func (o object) integer(name string) (*int64, error) {
	v := o.raw(name)
	if v == nil {
		return nil, nil
	}
	var n int64
	if err := json.Unmarshal(v, &n); err != nil {
		return nil, fieldError(name, "must be an integer")
	}
	return &n, nil
}

// timestamp returns an RFC 3339 field in UTC; nil when absent or "".
func (o object) timestamp(name string) (*time.Time, error) {
	v := o.raw(name)
	if v == nil {
		return nil, nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return nil, fieldError(name, "must be an RFC 3339 time string, e.g. \"2026-01-01T00:00:00Z\"")
	}
	if s == "" {
		return nil, nil
	}
	t, err := ParseTime(name, s)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// version returns a workflow version given as a string or a number.
func (o object) version(name string) (model.Version, error) {
	v := o.raw(name)
	if v == nil {
		return "", nil
	}
	if s, ok := plainString(v); ok {
		return model.Version(s), nil // what model.Version's UnmarshalJSON makes of it, without reflection
	}
	var ver model.Version
	if err := json.Unmarshal(v, &ver); err != nil {
		return "", fieldError(name, "must be a string or a number")
	}
	return ver, nil
}

// ParseTime parses an RFC 3339 time into UTC (field names it in errors). The instant must lie in
// years 1 to 9999 UTC: "9999-12-31T23:59:59-05:00" parses, but its UTC
// form can't be written back as RFC 3339, so storing it would make every
// later read of the record fail.
func ParseTime(field, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fieldError(field, "invalid RFC 3339 time %q, want e.g. \"2026-01-01T00:00:00Z\"", s)
	}
	t = t.UTC()
	if y := t.Year(); y < 1 || y > 9999 {
		return time.Time{}, fieldError(field, "%q is outside years 1 to 9999 in UTC", s)
	}
	return t, nil
}

// queryInt reads an integer query parameter in [lo, hi], def when absent.
func queryInt(c echo.Context, name string, def, lo, hi int) (int, error) {
	s := c.QueryParam(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, fieldError(name, "must be an integer between %d and %d, got %q", lo, hi, s)
	}
	return n, nil
}

// pathID reads and checks an identifier path parameter. Echo routes on
// the raw (escaped) path only when the URL has one that differs from the
// default encoding (an escaped "/", say); otherwise it routes on the
// already decoded path, and unescaping again would turn "x%2541" into
// "xA" instead of "x%41".
func pathID(c echo.Context, param, field string) (string, error) {
	v := c.Param(param)
	if c.Request().URL.RawPath != "" {
		var err error
		if v, err = url.PathUnescape(v); err != nil {
			return "", fieldError(field, "invalid path escape in %q", c.Param(param))
		}
	}
	if err := validateID(field, v); err != nil {
		return "", err
	}
	return v, nil
}

// workflowTarget reads what a run executes: workflow_id, version and
// user_id, all required. Their errors go to errs.
func workflowTarget(o object, errs *model.FieldErrors) (workflowID string, version model.Version, userID string) {
	workflowID = keep[string](errs)(requireID(o, "workflow_id"))
	version = keep[model.Version](errs)(o.version("version"))
	if !errs.Has("version") {
		errs.Add(model.ValidateID("version", string(version)))
	}
	userID = keep[string](errs)(boundedString(o, "user_id", true))
	return
}

// requireID checks a required identifier field of a body.
func requireID(o object, name string) (string, error) {
	v, err := o.str(name)
	if err != nil {
		return "", err
	}
	return v, validateID(name, v)
}

// validateID checks an identifier; a workflow id has a rule of its own.
func validateID(field, v string) error {
	if field == "workflow_id" {
		return model.ValidateWorkflowID(field, v)
	}
	return model.ValidateID(field, v)
}

// optionalID checks an identifier field that may be absent.
func optionalID(o object, name string) (string, error) {
	v, err := o.str(name)
	switch {
	case err != nil:
		return "", err
	case v == "" && o.raw(name) != nil:
		// Not taken for "omitted": a client whose id variable came out
		// empty would create a new schedule (or run) on every call.
		return "", fieldError(name, "is empty: omit it to have one generated")
	case v == "":
		return "", nil
	}
	return v, validateID(name, v)
}

// boundedString checks a free-form string field (model.ValidateText).
func boundedString(o object, name string, required bool) (string, error) {
	v, err := o.str(name)
	switch {
	case err != nil:
		return "", err
	case v == "" && required:
		return "", fieldError(name, "is required")
	}
	return v, model.ValidateText(name, v)
}
