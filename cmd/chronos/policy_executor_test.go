package main

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chronos-sched/chronos/model"
)

// policyCall is one executor call.
type policyCall struct {
	key, sid string
	runAt    time.Time
	at       time.Time
}

// policyExecutor is the executor service: allow runs end in its answer;
// skip and queue runs are answered 202 (STARTED) and reported SUCCESS or
// FAILED through the API after a random delay, or never.
type policyExecutor struct {
	srv    *httptest.Server
	api    func() string
	client *http.Client
	wg     sync.WaitGroup
	stop   chan struct{}

	mu      sync.Mutex
	calls   []policyCall
	bad     []string
	reports map[string]time.Time // key -> when a final report was answered 200
	never   map[string]bool
}

func newPolicyExecutor(t *testing.T, api func() string) *policyExecutor {
	e := &policyExecutor{api: api, reports: map[string]time.Time{}, never: map[string]bool{}, stop: make(chan struct{}),
		client: &http.Client{Timeout: 10 * time.Second}}
	e.srv = httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(func() {
		close(e.stop)
		e.srv.Close()
		e.wg.Wait()
	})
	return e
}

func keyHash(key string, salt string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(salt + key))
	return h.Sum64()
}

func (e *policyExecutor) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	key := r.Header.Get("Idempotency-Key")
	var req struct {
		Meta struct {
			ScheduleID     string    `json:"schedule_id"`
			ScheduledFor   time.Time `json:"scheduled_for"`
			IdempotencyKey string    `json:"idempotency_key"`
		} `json:"meta"`
	}
	err := json.NewDecoder(r.Body).Decode(&req)
	e.mu.Lock()
	if err != nil || req.Meta.IdempotencyKey != key || model.IdempotencyKey(req.Meta.ScheduleID, req.Meta.ScheduledFor) != key {
		e.bad = append(e.bad, fmt.Sprintf("key %s meta %+v err %v", key, req.Meta, err))
	}
	e.calls = append(e.calls, policyCall{key: key, sid: req.Meta.ScheduleID, runAt: req.Meta.ScheduledFor, at: at})
	e.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if strings.HasPrefix(req.Meta.ScheduleID, "pa-") {
		// Real time must pass: an overlap_policy=allow run takes a moment,
		// so that runs of the schedule overlap.
		const answerAfter = 20 * time.Millisecond
		<-time.After(answerAfter)
		fmt.Fprintf(w, `{"run_id":"x-%s","status":"SUCCESS"}`, key[:8])
		return
	}
	h := keyHash(key, "mode") % 100
	switch {
	case h < 8: // never reports: RUN_TIMEOUT must end it
		e.mu.Lock()
		e.never[key] = true
		e.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, `{"run_id":"x-%s"}`, key[:8])
		return
	case h < 16: // ends in the answer
		fmt.Fprintf(w, `{"run_id":"x-%s","status":"SUCCESS"}`, key[:8])
		e.mu.Lock()
		if _, ok := e.reports[key]; !ok {
			e.reports[key] = time.Now()
		}
		e.mu.Unlock()
		return
	}
	status := "SUCCESS"
	if h < 26 {
		status = "FAILED"
	}
	delay := 100*time.Millisecond + time.Duration(keyHash(key, "delay")%2400)*time.Millisecond
	w.WriteHeader(http.StatusAccepted)
	fmt.Fprintf(w, `{"run_id":"x-%s"}`, key[:8])
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		select {
		case <-time.After(delay):
		case <-e.stop:
			return
		}
		for attempt := 0; attempt < 20; attempt++ {
			req, _ := http.NewRequest(http.MethodPost, e.api()+"/runs/"+key+"/status",
				strings.NewReader(fmt.Sprintf(`{"status":%q,"run_id":"x-%s"}`, status, key[:8])))
			req.Header.Set("Content-Type", "application/json")
			resp, err := e.client.Do(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusConflict {
					e.mu.Lock()
					if _, ok := e.reports[key]; !ok {
						e.reports[key] = time.Now()
					}
					e.mu.Unlock()
					return
				}
			}
			select {
			case <-time.After(200 * time.Millisecond):
			case <-e.stop:
				return
			}
		}
	}()
}

func (e *policyExecutor) snapshot() ([]policyCall, []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.calls), slices.Clone(e.bad)
}

// callErr makes one API request without failing the test (for goroutines).
func (c *chaosCluster) callErr(method, path, body string) (int, string, error) {
	req, err := http.NewRequest(method, c.api+path, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
