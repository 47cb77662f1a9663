package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/queue/queuetest"
)

// echoKeyPrefix prefixes the hashes the echo baseline writes.
const echoKeyPrefix = "echo:"

// echoChild is the API's baseline, a child process of this program: a
// minimal echo handler for the same POST /schedules/upsert body that
// decodes it and writes one Redis hash per request (HTTP, JSON and one
// Redis round trip, the least an upsert can be). ECHO_ADDR is where it
// listens, ECHO_REDIS its Redis.
func echoChild() int {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("ECHO_REDIS")})
	defer rdb.Close()
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.GET("/healthz", func(c echo.Context) error { return c.NoContent(http.StatusOK) })
	e.POST("/schedules/upsert", func(c echo.Context) error {
		var body struct {
			ScheduleID string `json:"schedule_id"`
			WorkflowID string `json:"workflow_id"`
			Version    string `json:"version"`
			UserID     string `json:"user_id"`
			CronExpr   string `json:"cron_expr"`
			Timezone   string `json:"timezone"`
		}
		if err := c.Bind(&body); err != nil {
			return err
		}
		if err := rdb.HSet(c.Request().Context(), echoKeyPrefix+body.ScheduleID, "workflow_id", body.WorkflowID,
			"version", body.Version, "user_id", body.UserID, "cron_expr", body.CronExpr, "timezone", body.Timezone).Err(); err != nil {
			return err
		}
		return c.JSON(http.StatusOK, map[string]any{"schedule_id": body.ScheduleID, "created": true})
	})
	if err := e.Start(os.Getenv("ECHO_ADDR")); err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, "echo:", err)
		return 1
	}
	return 0
}

// apiEcho measures the echo baseline with the same load generator as the
// API run just before it.
func (b *bench) apiEcho(ctx context.Context, wrk string, clients int) (*apiResult, error) {
	e := b.e
	res := &apiResult{n: b.cfg.apiN, clients: clients}
	if err := e.flush(ctx); err != nil {
		return nil, err
	}
	port, err := queuetest.Port()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	p, err := e.spawn("echo-baseline", e.self, nil, map[string]string{childEnv: "echo", "ECHO_ADDR": addr, "ECHO_REDIS": e.redisAddr}, false)
	if err != nil {
		return nil, err
	}
	defer p.stop(5 * time.Second)
	client := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(10 * time.Second); ; {
		resp, err := client.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if p.exited() || time.Now().After(deadline) {
			return nil, fmt.Errorf("echo baseline not up on %s\n%s", addr, p.logTail(10))
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return nil, err
		}
	}
	url := "http://" + addr + "/schedules/upsert"
	cpu0, rc0 := cpuOf([]*proc{p}), redisCPU(ctx, e.rdb)
	if wrk != "" {
		res.load = "wrk"
		err = b.apiWrk(ctx, wrk, url, res)
	} else {
		res.load = "Go loop"
		self0 := selfCPU()
		b.apiGoLoop(ctx, url, res)
		res.loadCPU = selfCPU() - self0
	}
	if err != nil {
		return nil, err
	}
	per := func(d time.Duration) time.Duration { return d / time.Duration(max(res.sent, 1)) }
	res.apiCPU, res.redisCPU, res.loadCPU = per(cpuOf([]*proc{p})-cpu0), per(redisCPU(ctx, e.rdb)-rc0), per(res.loadCPU)
	res.rate = float64(res.ok) / res.elapsed.Seconds()
	n, err := e.rdb.DBSize(ctx).Result()
	if err != nil {
		return nil, err
	}
	res.created = int(n)
	e.logf("api echo baseline (%s): %d requests in %s (%.0f/s), %d errors, %d hashes", res.load, res.ok,
		res.elapsed.Round(time.Millisecond), res.rate, res.errors, res.created)
	return res, nil
}
