package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

type apiResult struct {
	n, clients int
	sent       int64
	ok         int64 // 200 with created=true
	errors     int64
	firstErr   string
	rate       float64
	lat        durStats
	elapsed    time.Duration
}

// api drives POST /schedules/upsert of a `chronos api` process from
// `clients` concurrent keep-alive clients, each request a new schedule,
// until n requests or the time cap.
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
				body := fmt.Sprintf(`{"schedule_id":"api-%s","workflow_id":"wf","version":"1","user_id":"bench","cron_expr":"*/5 * * * *","timezone":"Europe/Berlin"}`, scheduleID(i))
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewBufferString(body))
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
	res.rate = float64(res.ok) / res.elapsed.Seconds()
	e.logf("api: %d upserts in %s (%.0f/s), %d errors", res.ok, res.elapsed.Round(time.Millisecond), res.rate, res.errors)
	return res, nil
}
