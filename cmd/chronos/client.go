package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/alecthomas/kong"

	"github.com/chronos-sched/chronos/api"
)

// The commands that talk to a chronos API (schedule, alarm, workflow,
// mcp, import, export) share one client and one meaning of their exit
// status, so a script can tell what went wrong without reading stderr.
// docs/cli.md lists the codes.
const (
	// ExitOK: the command did what it was asked.
	ExitOK = 0
	// ExitFailure: anything not below, such as a server command that could
	// not start.
	ExitFailure = 1
	// ExitUsage: the command line is wrong, or the API refused the input
	// as invalid (400, 413, 415).
	ExitUsage = 2
	// ExitNotFound: the schedule, alarm, workflow version or run does not
	// exist (404).
	ExitNotFound = 3
	// ExitConflict: the API refused a change that conflicts with what it
	// holds (409, and 422: an Idempotency-Key reused with another body).
	ExitConflict = 4
	// ExitAuth: no token, or the API refused it (401) or found it lacks a
	// scope (403).
	ExitAuth = 5
	// ExitUnavailable: the API could not be reached or did not answer in
	// time, or answered that it cannot serve now (429, 5xx): retry later.
	ExitUnavailable = 6
)

// exitError is an error with its exit status.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// ExitCode is the process's exit status for the error.
func (e *exitError) ExitCode() int { return e.code }

// usageErrorf is a mistake on the command line (ExitUsage).
func usageErrorf(format string, args ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, args...)}
}

// exitCode is the exit status of a command that returned err.
func exitCode(err error) int {
	var pe *kong.ParseError
	var ec interface{ ExitCode() int }
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &pe):
		return ExitUsage
	case errors.As(err, &ec):
		return ec.ExitCode()
	}
	return ExitFailure
}

// apiError is a non-2xx answer of the API.
type apiError struct {
	Method, Path string
	Status       int
	// Code and Message are the API's {"error": {"code", "message"}};
	// Message is the body's text when it is not that JSON.
	Code, Message string
	Details       []api.FieldDetail
	// Hint says what to do, on a line of its own after the error.
	Hint string
}

func (e *apiError) Error() string {
	msg := fmt.Sprintf("%s %s: chronos answered %d: %s", e.Method, e.Path, e.Status, e.Message)
	if len(e.Details) > 1 {
		// The message joins them with "; ": a line each instead.
		msg = fmt.Sprintf("%s %s: chronos answered %d: %d fields at fault:", e.Method, e.Path, e.Status, len(e.Details))
		for _, d := range e.Details {
			msg += "\n  " + d.Message
		}
	}
	if hint := e.hint(); hint != "" {
		msg += "\n" + hint
	}
	return msg
}

// hint is e.Hint, or what to do about e's status in general.
func (e *apiError) hint() string {
	if e.Hint != "" {
		return e.Hint
	}
	switch {
	case e.Status == http.StatusUnauthorized:
		return "Set CHRONOS_TOKEN (or --token) to a token this API verifies: `chronos token --sub <you> --scope <scopes>` " +
			"mints one with the API's AUTH_JWT_SECRET; an alarm needs an agent's token, whose sub is its DID (or --owner)."
	case e.Status == http.StatusForbidden:
		return "The token lacks the scope named above: mint one that has it (`chronos token --scope ...`)."
	case e.Status == http.StatusTooManyRequests || e.Status >= 500:
		return "Retry later; if it persists, look at the API's logs and /readyz."
	}
	return ""
}

// ExitCode maps the status to the commands' exit status.
func (e *apiError) ExitCode() int {
	switch {
	case e.Status == http.StatusBadRequest || e.Status == http.StatusRequestEntityTooLarge ||
		e.Status == http.StatusUnsupportedMediaType:
		return ExitUsage
	case e.Status == http.StatusNotFound:
		return ExitNotFound
	case e.Status == http.StatusConflict || e.Status == http.StatusUnprocessableEntity:
		return ExitConflict
	case e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden:
		return ExitAuth
	case e.Status == http.StatusTooManyRequests || e.Status >= 500:
		return ExitUnavailable
	}
	return ExitFailure
}

// withHint sets the hint of an API error of status; other errors pass.
func withHint(err error, status int, format string, args ...any) error {
	var ae *apiError
	if errors.As(err, &ae) && ae.Status == status {
		ae.Hint = fmt.Sprintf(format, args...)
	}
	return err
}

// isNotFound reports whether err is the API's 404.
func isNotFound(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// apiClient calls a chronos API, with a bearer token when it has one
// (chronos dev serves its schedules open).
type apiClient struct {
	base  string
	token string
	http  *http.Client
}

func newAPIClient(url, token string) *apiClient {
	return &apiClient{base: strings.TrimRight(url, "/"), token: token, http: &http.Client{Timeout: time.Minute}}
}

// do sends a request and returns the body of a 2xx answer; any other
// answer is an *apiError quoting the API's message, and a failure to get
// one an error of status ExitUnavailable.
func (c *apiClient) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	return c.send(ctx, method, path, body, nil)
}

// send is do with extra request headers.
func (c *apiClient) send(ctx context.Context, method, path string, body []byte, header http.Header) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, usageErrorf("CHRONOS_URL=%s: %w", c.base, err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, &exitError{code: ExitUnavailable,
			err: fmt.Errorf("chronos API at %s (CHRONOS_URL): %w\nIs it running there? Set CHRONOS_URL (or --url) to its base URL", c.base, err)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, &exitError{code: ExitUnavailable, err: fmt.Errorf("%s %s: reading the answer: %w", method, path, err)}
	}
	if resp.StatusCode/100 != 2 {
		e := &apiError{Method: method, Path: path, Status: resp.StatusCode, Message: strings.TrimSpace(string(b))}
		var body api.ErrorBody
		if json.Unmarshal(b, &body) == nil && body.Error.Message != "" {
			e.Code, e.Message, e.Details = body.Error.Code, body.Error.Message, body.Error.Details
		}
		return nil, e
	}
	return b, nil
}

// getJSON GETs path into out, returning the body as sent too.
func (c *apiClient) getJSON(ctx context.Context, path string, out any) ([]byte, error) {
	return c.callJSON(ctx, http.MethodGet, path, nil, out)
}

// callJSON sends in (nil: no body) and decodes a 2xx answer into out
// (nil: none), returning the answer's body as sent.
func (c *apiClient) callJSON(ctx context.Context, method, path string, in, out any) ([]byte, error) {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return nil, err
		}
	}
	b, err := c.do(ctx, method, path, body)
	if err != nil {
		return nil, err
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return nil, fmt.Errorf("%s %s: the answer is not what this chronos expects (%w); is CHRONOS_URL a chronos API of the same version?", method, path, err)
		}
	}
	return b, nil
}
