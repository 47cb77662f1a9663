package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type apiResult struct {
	load       string // the load generator: "wrk" or "Go loop"
	n, clients int
	sent       int64 // requests answered
	ok         int64 // 200 with created=true
	errors     int64
	firstErr   string
	created    int // schedules in Redis afterwards
	rate       float64
	lat        durStats
	elapsed    time.Duration
	// CPU per upsert: the API process's, Redis's and the load generator's.
	apiCPU, redisCPU, loadCPU time.Duration
	// echo is the baseline measured right after: a minimal echo handler
	// writing one Redis hash per request, same load generator.
	echo *apiResult
}

// upsertBody is the body of the i-th request: a new schedule each time.
const upsertBody = `{"schedule_id":"api-%s","workflow_id":"wf","version":"1","user_id":"bench","cron_expr":"*/5 * * * *","timezone":"Europe/Berlin"}`

// api drives POST /schedules/upsert of a `chronos api` process with
// `clients` concurrent keep-alive connections, each request a new
// schedule, from wrk when it is installed (it costs the shared cores far
// less than a Go HTTP client) or else a Go load loop; then it counts the
// schedules the API stored.
func (b *bench) api(ctx context.Context) (*apiResult, error) {
	e := b.e
	res := &apiResult{n: b.cfg.apiN, clients: b.cfg.apiClients}
	if err := e.flush(ctx); err != nil {
		return nil, err
	}
	p, err := e.startChronos(ctx, "api", map[string]string{"MONITORING": "false"})
	if err != nil {
		return nil, err
	}
	defer p.stop(10 * time.Second)
	url := "http://" + p.httpAddr + "/schedules/upsert"

	wrk, _ := exec.LookPath("wrk")
	if b.cfg.apiLoad == "go" || (b.cfg.apiLoad == "auto" && wrk == "") {
		wrk = ""
	} else if wrk == "" {
		return nil, fmt.Errorf("-api-load wrk: wrk is not installed (apt-get install wrk)")
	}
	cpu0, rc0 := cpuOf([]*proc{p}), redisCPU(ctx, e.rdb)
	if wrk != "" {
		res.load = "wrk"
		err = b.apiWrk(ctx, wrk, url, res)
	} else {
		res.load = "Go loop"
		self0 := selfCPU()
		b.apiGoLoop(ctx, url, res)
		res.loadCPU = selfCPU() - self0 // this process: the loop, and little else meanwhile
	}
	if err != nil {
		return nil, err
	}
	per := func(d time.Duration) time.Duration { return d / time.Duration(max(res.sent, 1)) }
	res.apiCPU, res.redisCPU, res.loadCPU = per(cpuOf([]*proc{p})-cpu0), per(redisCPU(ctx, e.rdb)-rc0), per(res.loadCPU)
	res.rate = float64(res.ok) / res.elapsed.Seconds()

	store, err := e.newStore(ctx, 0, 0)
	if err != nil {
		return nil, err
	}
	for cursor := ""; ; {
		page, next, err := store.ListSchedules(ctx, cursor, 1000)
		if err != nil {
			return nil, fmt.Errorf("count stored schedules: %w", err)
		}
		res.created += len(page)
		if cursor = next; cursor == "" {
			break
		}
	}
	e.logf("api (%s): %d upserts in %s (%.0f/s), %d errors, %d schedules stored", res.load, res.ok,
		res.elapsed.Round(time.Millisecond), res.rate, res.errors, res.created)
	p.stop(10 * time.Second)
	res.echo, err = b.apiEcho(ctx, wrk, res.clients)
	return res, err
}

// apiGoLoop sends n requests from `clients` goroutines, until the time cap.
func (b *bench) apiGoLoop(ctx context.Context, url string, res *apiResult) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		MaxIdleConns: res.clients, MaxIdleConnsPerHost: res.clients, IdleConnTimeout: time.Minute,
	}}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, b.cfg.apiMax)
	defer cancel()
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
	)
	lats := make([][]time.Duration, res.clients)
	start := time.Now()
	for w := range res.clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= res.n {
					return
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(fmt.Sprintf(upsertBody, scheduleID(i))))
				req.Header.Set("Content-Type", "application/json")
				t := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					atomic.AddInt64(&res.errors, 1)
					errOnce.Do(func() { res.firstErr = err.Error() })
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				lats[w] = append(lats[w], time.Since(t))
				atomic.AddInt64(&res.sent, 1)
				var out struct {
					Created bool `json:"created"`
				}
				if resp.StatusCode == http.StatusOK && json.Unmarshal(b, &out) == nil && out.Created {
					atomic.AddInt64(&res.ok, 1)
				} else {
					atomic.AddInt64(&res.errors, 1)
					errOnce.Do(func() { res.firstErr = fmt.Sprintf("%d %s", resp.StatusCode, bytes.TrimSpace(b)) })
				}
			}
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	res.lat = percentiles(all)
}

// wrkScript makes every request a new schedule (ids unique per wrk
// thread) and prints wrk's summary as one JSON line.
const wrkScript = `wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local threads = 0
function setup(thread)
  thread:set("tid", threads)
  threads = threads + 1
end
local n = 0
function request()
  n = n + 1
  return wrk.format(nil, nil, nil, string.format('%s', "w" .. tid .. "-" .. n))
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRK {"requests":%%d,"duration_us":%%d,"status":%%d,"other":%%d,"p50_us":%%d,"p99_us":%%d,"max_us":%%d}\n',
    summary.requests, summary.duration, e.status, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(99), latency.max))
end
`

// apiWrk runs wrk for -api-duration with 2 threads (one per core) and
// `clients` connections. wrk does not read bodies, so "created" is
// checked by counting the stored schedules afterwards.
func (b *bench) apiWrk(ctx context.Context, wrk, url string, res *apiResult) error {
	script := filepath.Join(b.e.dir, "upsert.lua")
	if err := os.WriteFile(script, []byte(fmt.Sprintf(wrkScript, fmt.Sprintf(upsertBody, "%s"))), 0o644); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, wrk, "-t2", "-c"+strconv.Itoa(res.clients),
		"-d"+strconv.Itoa(max(int(b.cfg.apiDuration.Seconds()), 1))+"s", "--timeout", "10s", "-s", script, url)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("wrk: %w\n%s", err, stderr.String())
	}
	res.loadCPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	line, ok := "", false
	for l := range strings.Lines(out.String()) {
		if s, found := strings.CutPrefix(l, "WRK "); found {
			line, ok = s, true
		}
	}
	if !ok {
		return fmt.Errorf("wrk printed no summary:\n%s", out.String())
	}
	var w struct {
		Requests   int64 `json:"requests"`
		DurationUS int64 `json:"duration_us"`
		Status     int64 `json:"status"` // non-2xx answers
		Other      int64 `json:"other"`  // connect, read, write errors and timeouts
		P50US      int64 `json:"p50_us"`
		P99US      int64 `json:"p99_us"`
		MaxUS      int64 `json:"max_us"`
	}
	if err := json.Unmarshal([]byte(line), &w); err != nil {
		return fmt.Errorf("wrk summary %q: %w", line, err)
	}
	res.sent, res.errors = w.Requests, w.Status+w.Other
	res.ok = w.Requests - w.Status
	res.elapsed = time.Duration(w.DurationUS) * time.Microsecond
	us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	res.lat = durStats{n: int(w.Requests), p50: us(w.P50US), p99: us(w.P99US), max: us(w.MaxUS)}
	if res.errors > 0 {
		res.firstErr = fmt.Sprintf("wrk: %d non-2xx responses, %d socket errors", w.Status, w.Other)
	}
	return nil
}
