package launcher

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chronos-sched/chronos/model"
)

// Meta tells the executor where a run comes from.
type Meta struct {
	Source         model.RunSource `json:"source"`
	ScheduleID     string          `json:"schedule_id,omitempty"`
	WorkflowID     string          `json:"workflow_id"`
	Version        string          `json:"version"`
	UserID         string          `json:"user_id"`
	ScheduledFor   time.Time       `json:"scheduled_for"`
	IdempotencyKey string          `json:"idempotency_key"`
}

// Request is one run for an Executor.
type Request struct {
	DAG  json.RawMessage `json:"dag"`
	Meta Meta            `json:"meta"`
	// Wake, when set, is an alarm's wake, which the launcher delivers
	// through its Waker instead (wake.go); DAG and Meta are empty.
	Wake *Wake `json:"-"`
}

// Result is what an Executor reports. Status SUCCESS or FAILED ends the
// run; any other (STARTED, or none) means the run goes on elsewhere and
// will report its end to POST /runs/{key}/status.
type Result struct {
	RunID  string          `json:"run_id"`
	Status model.RunStatus `json:"status"`
	Error  string          `json:"error"`
}

// Executor starts runs. It may be called more than once for the same
// idempotency key (execution is at least once) and must deduplicate on it.
type Executor interface {
	Execute(ctx context.Context, req Request) (Result, error)
}

// PermanentError marks an executor failure that retrying cannot fix.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// RetryAfterError is an executor failure to retry no sooner than After
// (an HTTP executor's Retry-After), however short the backoff.
type RetryAfterError struct {
	Err   error
	After time.Duration
}

func (e *RetryAfterError) Error() string { return e.Err.Error() }
func (e *RetryAfterError) Unwrap() error { return e.Err }

// maxRetryAfter bounds how long an executor's Retry-After delays a retry:
// the longest backoff, well inside RUN_TIMEOUT and LAUNCH_GRACE's
// defaults (a skip/queue run waiting an hour for its retry would be
// failed by RUN_TIMEOUT meanwhile).
const maxRetryAfter = 5 * time.Minute

// LogExecutor is the demo executor of chronos dev: it logs each run and
// reports success.
type LogExecutor struct{ Logger *slog.Logger }

// Execute logs the run.
func (e LogExecutor) Execute(ctx context.Context, req Request) (Result, error) {
	// Enabled first: the arguments are boxed before InfoContext can tell
	// that it drops them (chronos dev logs at info, launchers at warn).
	if e.Logger.Enabled(ctx, slog.LevelInfo) {
		e.Logger.InfoContext(ctx, "run executed (log executor)",
			"schedule_id", req.Meta.ScheduleID, "workflow_id", req.Meta.WorkflowID, "version", req.Meta.Version,
			"scheduled_for", req.Meta.ScheduledFor, "idempotency_key", req.Meta.IdempotencyKey)
	}
	return Result{RunID: "log-" + req.Meta.IdempotencyKey[:min(12, len(req.Meta.IdempotencyKey))], Status: model.RunSuccess}, nil
}

// HTTPExecutor POSTs {dag, meta} to URL with an Idempotency-Key header.
// A 2xx answer starts the run: its optional JSON body {run_id, status}
// says more (status SUCCESS or FAILED ends the run at once; otherwise it is
// STARTED). 409 is what an executor deduplicating on the key answers
// while an earlier call with it is still in progress (one this launcher
// gave up on at EXECUTOR_TIMEOUT): the executor has the run, so it is
// STARTED too (retrying could run out of attempts and fail a run that is
// being started). 408, 429 and 5xx answers and transport errors are
// retried by asynq with backoff, or after their Retry-After if that is
// longer (up to 5 minutes); other 4xx answers and redirects fail the run
// at once.
type HTTPExecutor struct {
	URL    string
	Client *http.Client
}

// NewHTTPExecutor returns an HTTPExecutor whose calls time out after
// timeout and that keeps up to maxConns connections to the executor open
// (one per concurrent run: Go's default keeps only 2 idle per host, so a
// busy launcher would dial for most calls). Redirects are not followed:
// Go would turn a 301/302/303 into a GET without the run, and a 2xx
// answer to it would pass for a started run.
func NewHTTPExecutor(url string, timeout time.Duration, maxConns int) *HTTPExecutor {
	return &HTTPExecutor{URL: url, Client: newPostClient(timeout, maxConns)}
}

// newPostClient is the HTTP client of the executor and the waker: calls
// time out after timeout, up to maxConns connections stay open, and
// redirects are not followed (see NewHTTPExecutor).
func newPostClient(timeout time.Duration, maxConns int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = max(maxConns, 2)
	tr.MaxIdleConnsPerHost = max(maxConns, 2)
	return &http.Client{Timeout: timeout, Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// answerError is the error of a call that got a non-2xx answer from who
// (the executor, the wake receiver) at the URL of setting: a redirect
// or a 4xx is permanent, except 408, 429 and any status in retried;
// a 5xx is retried, after its Retry-After if it gives one.
func answerError(who, setting string, resp *http.Response, body []byte, retried ...int) error {
	c := resp.StatusCode
	if c >= 300 && c < 400 {
		return &PermanentError{fmt.Errorf("%s answered %s, a redirect to %q: chronos does not follow redirects; set %s to the URL that answers",
			who, resp.Status, resp.Header.Get("Location"), setting)}
	}
	text := strings.ToValidUTF8(string(body[:min(len(body), 300)]), "")
	err := fmt.Errorf("%s answered %s: %s", who, resp.Status, strings.TrimSpace(text))
	if c >= 400 && c < 500 && c != http.StatusRequestTimeout && c != http.StatusTooManyRequests && !slices.Contains(retried, c) {
		return &PermanentError{err}
	}
	if after, ok := retryAfter(resp.Header.Get("Retry-After")); ok {
		return &RetryAfterError{Err: err, After: after}
	}
	return err
}

// Execute calls the executor service.
func (e *HTTPExecutor) Execute(ctx context.Context, req Request) (Result, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return Result{}, &PermanentError{err}
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL, bytes.NewReader(body))
	if err != nil {
		return Result{}, &PermanentError{fmt.Errorf("EXECUTOR_URL %q: %w", e.URL, err)}
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Idempotency-Key", req.Meta.IdempotencyKey)
	resp, err := e.Client.Do(hr)
	if err != nil {
		return Result{}, fmt.Errorf("call executor: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode == http.StatusConflict {
		return Result{}, nil // STARTED: see above
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return Result{}, answerError("executor", "EXECUTOR_URL", resp, b)
	}
	var r Result
	if len(bytes.TrimSpace(b)) > 0 {
		_ = json.Unmarshal(b, &r) // a body that isn't ours just means "started"
	}
	return r, nil
}

// retryAfter reads a Retry-After header: delay seconds or an HTTP date.
func retryAfter(h string) (time.Duration, bool) {
	if h == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(h, 10, 64); err == nil && secs >= 0 {
		return time.Duration(min(secs, int64(maxRetryAfter/time.Second))) * time.Second, true
	}
	if at, err := http.ParseTime(h); err == nil {
		return min(max(time.Until(at), 0), maxRetryAfter), true
	}
	return 0, false
}

// isPermanent reports whether err should not be retried.
func isPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}
