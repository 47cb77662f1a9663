package launcher

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
)

// TestHTTPExecutor checks the executor that calls a workflow service over
// HTTP: the call it makes, which answers it retries and how soon, and what
// it refuses to take for a start.
func TestHTTPExecutor(t *testing.T) {
	t.Parallel()

	t.Run("StartsARun", func(t *testing.T) {
		t.Parallel()
		var (
			mu   sync.Mutex
			got  []string
			body Request
		)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, r.Header.Get("Idempotency-Key"))
			_ = json.NewDecoder(r.Body).Decode(&body)
			_, _ = w.Write([]byte(`{"run_id":"wf-run-7"}`))
		}))
		t.Cleanup(srv.Close)
		b := setup(t, NewHTTPExecutor(srv.URL, 5*time.Second, 4), nil)
		b.manual(t, "key-3", true)
		run := b.waitStatus(t, "key-3", model.RunStarted)
		require.Equal(t, "wf-run-7", run.RunID)
		mu.Lock()
		require.Equal(t, []string{"key-3"}, got)
		require.Equal(t, "key-3", body.Meta.IdempotencyKey)
		require.Equal(t, model.SourceManual, body.Meta.Source)
		mu.Unlock()

		// The workflow reports its end to the run record.
		run, err := b.store.UpdateRunStatus(context.Background(), "key-3", queue.StatusUpdate{Status: model.RunSuccess})
		require.NoError(t, err)
		require.Equal(t, model.RunSuccess, run.Status)
	})

	t.Run("RetriesThenFails", func(t *testing.T) {
		t.Parallel()
		url, calls := failingExecutor(t, http.StatusServiceUnavailable)
		b := setup(t, NewHTTPExecutor(url, 5*time.Second, 4), &queue.Config{TaskMaxRetry: 1})
		b.manual(t, "key-4", true)
		run := b.waitStatus(t, "key-4", model.RunFailed)
		require.Contains(t, run.Error, "after 2 attempts")
		require.Contains(t, run.Error, "503")
		require.Equal(t, 2, calls())
	})

	// A rate-limited or unavailable executor's Retry-After (seconds or an
	// HTTP date) delays the retry at least that long, up to maxRetryAfter: the
	// backoff alone could spend every attempt before the executor is back. Its
	// error text is cut at a rune boundary.
	t.Run("RetryAfterDelaysTheRetry", func(t *testing.T) {
		t.Parallel()
		ex := func(status int, retryAfter, body string) error {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if retryAfter != "" {
					w.Header().Set("Retry-After", retryAfter)
				}
				w.WriteHeader(status)
				_, _ = w.Write([]byte(body))
			}))
			defer srv.Close()
			_, err := NewHTTPExecutor(srv.URL, 5*time.Second, 1).Execute(context.Background(), Request{Meta: Meta{IdempotencyKey: "k"}})
			require.Error(t, err)
			return err
		}
		require.Equal(t, 90*time.Second, retryDelay(0, ex(http.StatusTooManyRequests, "90", ""), nil))
		require.Equal(t, 4*time.Second, retryDelay(2, ex(http.StatusServiceUnavailable, "1", ""), nil), "the backoff when longer")
		require.Equal(t, maxRetryAfter, retryDelay(0, ex(http.StatusServiceUnavailable, "86400", ""), nil))
		date := time.Now().Add(2 * time.Minute).UTC().Format(http.TimeFormat)
		require.InDelta(t, 2*time.Minute, retryDelay(0, ex(http.StatusServiceUnavailable, date, ""), nil), float64(2*time.Second))
		require.Equal(t, time.Second, retryDelay(0, ex(http.StatusServiceUnavailable, "soon", ""), nil), "an unreadable one is ignored")

		err := ex(http.StatusBadGateway, "", strings.Repeat("é", 400))
		require.True(t, utf8.ValidString(err.Error()), "error text cut inside a rune: %q", err.Error())
	})

	t.Run("NoRetryFailsOnFirstError", func(t *testing.T) {
		t.Parallel()
		url, calls := failingExecutor(t, http.StatusServiceUnavailable)
		b := setup(t, NewHTTPExecutor(url, 5*time.Second, 4), &queue.Config{TaskMaxRetry: queue.NoRetry})
		b.manual(t, "key-7", true)
		run := b.waitStatus(t, "key-7", model.RunFailed)
		require.Contains(t, run.Error, "after 1 attempts")
		require.Equal(t, 1, calls())
	})

	t.Run("ClientErrorIsPermanent", func(t *testing.T) {
		t.Parallel()
		url, calls := failingExecutor(t, http.StatusUnprocessableEntity)
		b := setup(t, NewHTTPExecutor(url, 5*time.Second, 4), nil)
		b.manual(t, "key-5", true)
		run := b.waitStatus(t, "key-5", model.RunFailed)
		require.Contains(t, run.Error, "422")
		require.Equal(t, 1, calls())
	})

	// A redirect in front of the executor (http to https, a trailing slash)
	// fails the run with the redirect's target: followed, Go's client would
	// send a GET without the run, and a 2xx answer would pass for a start.
	t.Run("DoesNotFollowRedirects", func(t *testing.T) {
		t.Parallel()
		var posts, gets atomic.Int32
		mux := http.NewServeMux()
		mux.HandleFunc("/runs", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/runs/", http.StatusMovedPermanently)
		})
		mux.HandleFunc("/runs/", func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				posts.Add(1)
				w.WriteHeader(http.StatusAccepted)
				return
			}
			gets.Add(1)
			_, _ = w.Write([]byte(`[]`))
		})
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		b := setup(t, NewHTTPExecutor(srv.URL+"/runs", 5*time.Second, 2), nil)
		b.manual(t, "key-redirect", true)
		run := b.waitStatus(t, "key-redirect", model.RunFailed)
		require.Contains(t, run.Error, `301 Moved Permanently, a redirect to "/runs/"`)
		require.Contains(t, run.Error, "set EXECUTOR_URL")
		require.Zero(t, posts.Load()+gets.Load())
	})

	// An executor that deduplicates on the Idempotency-Key header the way the
	// IETF Idempotency-Key draft (and chronos's own "deduplicate on it")
	// describes answers 409 Conflict to a retry that arrives while the first
	// request with that key is still being processed. chronos retries exactly
	// then: after its own EXECUTOR_TIMEOUT gave up on the first call. The run
	// is in progress at the executor; recording it FAILED (final) is wrong,
	// and the workflow's own end report is then refused.
	t.Run("IdempotencyConflictFromTheExecutorDoesNotFailTheRun", func(t *testing.T) {
		t.Parallel()
		var (
			mu         sync.Mutex
			processing = map[string]bool{}
			done       = map[string]bool{}
		)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			key := r.Header.Get("Idempotency-Key")
			mu.Lock()
			switch {
			case done[key]:
				mu.Unlock()
				w.WriteHeader(http.StatusAccepted) // replay of the stored answer
				return
			case processing[key]:
				mu.Unlock()
				http.Error(w, "a request with this Idempotency-Key is being processed", http.StatusConflict)
				return
			}
			processing[key] = true
			mu.Unlock()
			// Real time must pass: the executor is slow to accept, longer than
			// EXECUTOR_TIMEOUT, so the launcher gives up on the call meanwhile.
			const slowAccept = 4 * time.Second
			<-time.After(slowAccept)
			mu.Lock()
			done[key] = true
			mu.Unlock()
			w.WriteHeader(http.StatusAccepted)
		}))
		t.Cleanup(srv.Close)
		// One retry: the 409 comes on the last attempt, where an error would
		// fail the run.
		b := setup(t, NewHTTPExecutor(srv.URL, 300*time.Millisecond, 2), &queue.Config{TaskMaxRetry: 1})
		b.manual(t, "key-409", true)
		// Polled by hand rather than with require.Eventually: a FAILED status
		// seen on the way must fail the test at once.
		poll := time.NewTicker(20 * time.Millisecond)
		defer poll.Stop()
		for deadline := time.Now().Add(20 * time.Second); ; <-poll.C {
			r, _, err := b.store.GetRun(context.Background(), "key-409")
			require.NoError(t, err)
			require.NotEqual(t, model.RunFailed, r.Status, "run FAILED while the executor runs it: %s", r.Error)
			if r.Status == model.RunStarted {
				return
			}
			require.True(t, time.Now().Before(deadline), "run never STARTED: %s", r.Status)
		}
	})
}
