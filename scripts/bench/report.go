package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// row is one line of the table.
type row struct {
	scenario, figure, value, vs, target, ok string
}

func printReport(w io.Writer, b *bench, header string, took time.Duration) {
	rows := b.rows()
	fmt.Fprintf(w, "\n## chronos benchmark, %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(w, "%s\n\n", header)
	fmt.Fprintf(w, "command: `go run ./scripts/bench %s` · total %s\n\n", strings.Join(os.Args[1:], " "), took.Round(time.Second))
	fmt.Fprintln(w, "| scenario | figure | value | vs limit / peer | target | ok |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", r.scenario, r.figure, r.value, r.vs, r.target, r.ok)
	}
	fmt.Fprintln(w)
	for _, n := range b.notes() {
		fmt.Fprintf(w, "- %s\n", n)
	}
	if len(b.res.errs) > 0 {
		fmt.Fprintln(w, "\n**Failed scenarios**")
		for _, e := range b.res.errs {
			fmt.Fprintf(w, "- %s\n", strings.ReplaceAll(e, "\n", "\n  "))
		}
	}
	if p := b.res.profile; p != nil {
		fmt.Fprintf(w, "\n### CPU profile: in-process scheduler, %s-schedule burst\n\n", count(p.n))
		fmt.Fprintf(w, "first enqueue at due+%s, last at due+%s (%s between them); in the %s window the scheduler process used %s CPU and Redis %s; profiles: %s, %s\n\n",
			secs(p.enq.first), secs(p.enq.last), rate(between(p.n, p.enq)), secs(p.window), secs(p.cpu), secs(p.redisCPU), p.cpuPath, p.heapPath)
		fmt.Fprintf(w, "Redis commands in the window (time inside Redis, scripts include their commands): %s\n\n", formatCmdStats(p.cmdstats, 8))
		fmt.Fprintf(w, "Flat:\n```\n%s```\nCumulative, chronos frames:\n```\n%s```\n", p.top, p.topCum)
	}
}

func (b *bench) rows() []row {
	var rows []row
	add := func(r row) { rows = append(rows, r) }
	res := &b.res
	limit := res.limit

	vsLimit := func(rate float64) string {
		if limit == nil || limit.best == 0 || rate == 0 {
			return ""
		}
		return fmt.Sprintf("%.2f× limit", rate/limit.best)
	}

	if limit != nil {
		for _, c := range b.cfg.limitClients {
			r := row{scenario: "1 limit", figure: fmt.Sprintf("raw asynq enqueue, sha256 TaskID, %d clients", c),
				value: rate(limit.rates[c]), vs: fmt.Sprintf("Redis at %.0f%% of a core", 100*limit.redisCPU[c])}
			if c == limit.bestClients {
				r.vs += " · **the limit** (best)"
			}
			add(r)
		}
		add(row{scenario: "1 limit", figure: fmt.Sprintf("raw asynq drain, 1 server, concurrency %d, no-op handler", limit.drainConc),
			value: rate(limit.drain), vs: fmt.Sprintf("**the drain limit** · CPU per task: asynq server %s, Redis %s",
				limit.drainCPU.Round(time.Microsecond), limit.drainRedisCPU.Round(time.Microsecond)),
			ok: check(limit.drained == int64(limit.n), fmt.Sprintf("%d/%d", limit.drained, limit.n))})
	}

	for _, r := range res.bursts {
		name := fmt.Sprintf("2 cold burst %s ×%d", count(r.n), r.replicas)
		b.burstRows(add, name, r, vsLimit)
	}
	for _, r := range res.warms {
		name := fmt.Sprintf("2 warm burst %s ×%d", count(r.n), r.replicas)
		b.burstRows(add, name, r, vsLimit)
	}
	if c := res.catchup; c != nil {
		b.catchupRows(add, c)
	}
	if r := res.dup; r != nil {
		name := fmt.Sprintf("3 dup chronos ×%d", r.replicas)
		b.burstRows(add, name, r, vsLimit)
	}
	if p := res.peerDup; p != nil {
		value := fmt.Sprintf("%d of %d entries enqueued more than once; %d extra tasks (%d tasks)", p.dupEntries, p.n, p.extra, p.tasks)
		if !p.sameBound || p.errors > 0 || !p.enq.complete {
			value += fmt.Sprintf(" (not a clean measurement: replicas at one boundary %v, %d enqueue errors, all enqueued %v)", p.sameBound, p.errors, p.enq.complete)
		}
		add(row{scenario: fmt.Sprintf("3 dup asynq.Scheduler ×%d", p.replicas),
			figure: fmt.Sprintf("duplicates at one boundary (%s entries, `%s`)", count(p.n), p.spec),
			value:  value, vs: dupVs(res.dup), target: "chronos: 0",
			ok: check(res.dup != nil && res.dup.extra == 0 && res.dup.exactlyOnce(), "")})
	}
	for _, p := range res.peers {
		name := fmt.Sprintf("3 peer asynq.Scheduler %s", count(p.n))
		add(row{scenario: name, figure: fmt.Sprintf("boundary → last enqueue (`%s`)", p.spec), value: secs(p.enq.last),
			vs: chronosVsPeer(res.bursts, p), ok: check(p.enq.complete && p.errors == 0, fmt.Sprintf("%d/%d enqueued", p.enq.reached, p.n))})
		add(row{scenario: name, figure: "drift p50 / p99 after the boundary (pending list)", value: secs(p.enq.p50) + " / " + secs(p.enq.p99),
			vs: fmt.Sprintf("PostEnqueueFunc: %d / %d / %d ms (p50/p99/last)", p.post.P50MS, p.post.P99MS, p.post.LastMS)})
		add(row{scenario: name, figure: "fires/s (N ÷ boundary→last)", value: rate(p.firesPerSec()), vs: vsLimit(p.firesPerSec())})
		add(row{scenario: name, figure: "process RSS after registering / peak", value: mb(p.rssRegKB) + " / " + mb(p.hwmKB)})
	}

	if s := res.steady; s != nil {
		name := fmt.Sprintf("4 steady %s / %s × %d", count(s.n), s.period, s.periods)
		add(row{scenario: name, figure: "exactly once: schedules with one run at every measured boundary; run records = tasks",
			value:  fmt.Sprintf("%d/%d schedules; %d runs, %d tasks", s.schedOK, s.n, s.runs, s.tasks),
			target: "all; 0 duplicates", ok: check(s.schedOK == s.n && s.runs == s.tasks && s.matched == s.expected, "")})
		add(row{scenario: name, figure: fmt.Sprintf("runs enqueued ahead of their planned time (LOOKAHEAD %s)", lookaheadDefault),
			value: fmt.Sprintf("%.1f%% (%d of %d)", pct(s.ahead, s.expected), s.ahead, s.expected)})
		var peer10 *peerResult
		for _, p := range res.peers {
			if p.n == s.n {
				peer10 = p
			}
		}
		vs := ""
		if peer10 != nil {
			vs = fmt.Sprintf("asynq.Scheduler %s: p99 %s", count(peer10.n), secs(peer10.enq.p99))
		}
		add(row{scenario: name, figure: "scheduler lateness p50 / p99 / max: enqueue − planned, 0 when ahead",
			value: secs(s.late.p50) + " / " + secs(s.late.p99) + " / " + secs(s.late.max)})
		add(row{scenario: name, figure: "drift p50 / p99 / max: runnable in asynq (pending list) − planned",
			value:  secs(s.runnable.p50) + " / " + secs(s.runnable.p99) + " / " + secs(s.runnable.max),
			vs:     fmt.Sprintf("first at %s; %d of %d runs measured; %s", secs(s.runnable.min), s.runnable.n, s.expected, vs),
			target: "p99 ≤ 0.5 s, ≤ peer",
			ok: check(s.runnable.n == s.expected && s.runnable.p99 <= 500*time.Millisecond &&
				(peer10 == nil || s.runnable.p99 <= peer10.enq.p99), "")})
		add(row{scenario: name, figure: fmt.Sprintf("start delay p50 / p99 / max at the executor (%d launcher × concurrency %d)", s.launchers, s.launcherConc),
			value: secs(s.start.p50) + " / " + secs(s.start.p99) + " / " + secs(s.start.max),
			vs:    fmt.Sprintf("%d/%d runs reached the executor; %d calls came on %d new TCP connections", s.started, s.expected, s.calls, s.conns)})
		add(row{scenario: name, figure: "scheduler CPU per minute", value: fmt.Sprintf("%.2f s/min (%.1f%% of a core)", s.cpuPerMin, 100*s.cpuPerMin/60),
			vs: fmt.Sprintf("launchers: %.2f s/min", s.launcherCPU)})
		add(row{scenario: name, figure: "scheduler RSS / peak", value: mb(s.rssKB) + " / " + mb(s.hwmKB)})
	}

	for _, f := range res.footprints {
		name := fmt.Sprintf("5 footprint %s", count(f.n))
		big := f.n >= 1000000
		add(row{scenario: name, figure: "Redis bytes per schedule, no runs", value: fmt.Sprintf("%.0f B", f.perSched),
			target: "≤ 600 B", ok: check(f.perSched <= 600, "")})
		add(row{scenario: name, figure: fmt.Sprintf("Redis bytes per schedule with %d runs kept", f.runs), value: fmt.Sprintf("%.0f B", f.perSchedRuns),
			vs: fmt.Sprintf("%.0f B per run record; %.0f B per asynq task (not included)", f.perRun, f.perTask)})
		t, ok := "", ""
		if big {
			t, ok = "≤ 1% of a core at 1M", check(f.idleCPU <= 0.01, "")
		}
		add(row{scenario: name, figure: fmt.Sprintf("idle scheduler CPU, none due (%s window)", f.idle), value: fmt.Sprintf("%.2f%% of a core", 100*f.idleCPU),
			vs: fmt.Sprintf("Redis at %.2f%% of a core", 100*f.idleRedisCPU), target: t, ok: ok})
		t, ok = "", ""
		if big {
			t, ok = "≤ 64 MB at 1M", check(f.hwmKB <= 64*1024, "")
		}
		add(row{scenario: name, figure: "idle scheduler RSS / peak", value: mb(f.rssKB) + " / " + mb(f.hwmKB), target: t, ok: ok})
	}

	for _, s := range res.launches {
		l := s.median()
		name := fmt.Sprintf("6 launch %s ×%d", count(l.n), l.launchers)
		ratios := make([]string, len(s.rounds))
		for i, r := range s.rounds {
			ratios[i] = fmt.Sprintf("%.2f×", r.ratio())
		}
		// Process for process: against as many asynq servers draining
		// together on the same cores, just before.
		add(row{scenario: name, figure: fmt.Sprintf("runs/s end to end (log executor, concurrency %d), median of %d rounds", l.conc, len(s.rounds)),
			value: rate(l.rate),
			vs: fmt.Sprintf("%.2f× raw drain of %d server(s) (%s) in its round · rounds %s", l.ratio(), l.launchers, rate(l.drain),
				strings.Join(ratios, ", ")),
			target: "≥ 1.0× drain per process", ok: check(l.ratio() >= 1.0, "")})
		success, n := 0, 0
		for _, r := range s.rounds {
			success, n = success+r.success, n+r.n
		}
		add(row{scenario: name, figure: "runs finished with status SUCCESS, all rounds", value: fmt.Sprintf("%d/%d", success, n),
			vs:     fmt.Sprintf("CPU per run in that round: launchers %s, Redis %s; launchers' allocations per run %.0f", l.cpuPerRun.Round(time.Microsecond), l.redisCPUPerRun.Round(time.Microsecond), l.allocsPerRun),
			target: "all", ok: check(success == n, "")})
	}

	rows = append(rows, b.idleRows()...)    // idle.go
	rows = append(rows, b.clusterRows()...) // cluster.go

	if a := res.api; a != nil {
		name := fmt.Sprintf("7 api ×%d clients", a.clients)
		vsEcho, good := "", false
		if ec := a.echo; ec != nil && ec.rate > 0 {
			vsEcho = fmt.Sprintf("**%.2f× the echo baseline** (%s) · ", a.rate/ec.rate, rate(ec.rate))
			good = a.rate >= 0.5*ec.rate
		}
		add(row{scenario: name, figure: "POST /schedules/upsert, new schedules (" + a.load + ")", value: rate(a.rate),
			vs: vsEcho + fmt.Sprintf("%d upserted in %s, %d errors, %d schedules stored · CPU per upsert: API %s, Redis %s, %s %s",
				a.ok, a.elapsed.Round(time.Millisecond), a.errors, a.created,
				a.apiCPU.Round(time.Microsecond), a.redisCPU.Round(time.Microsecond), a.load, a.loadCPU.Round(time.Microsecond)),
			target: "≥ 0.5× echo baseline", ok: check(good && a.errors == 0 && apiStoredAll(a), "")})
		add(row{scenario: name, figure: "latency p50 / p99 / max", value: ms(a.lat.p50) + " / " + ms(a.lat.p99) + " / " + ms(a.lat.max),
			target: "p99 ≤ 20 ms", ok: check(a.lat.n > 0 && a.lat.p99 <= 20*time.Millisecond, "")})
		if ec := a.echo; ec != nil {
			add(row{scenario: name, figure: "echo baseline: one Redis HSET per request (" + ec.load + ")", value: rate(ec.rate),
				vs: fmt.Sprintf("p50 / p99 %s / %s; %d requests, %d errors, %d hashes · CPU per request: echo %s, Redis %s",
					ms(ec.lat.p50), ms(ec.lat.p99), ec.ok, ec.errors, ec.created, ec.apiCPU.Round(time.Microsecond), ec.redisCPU.Round(time.Microsecond))})
		}
	}
	return rows
}

// apiStoredAll says every accepted upsert stored its schedule: exactly
// for the Go loop; for wrk, requests in flight when it stopped were
// stored but not counted, at most one per connection.
func apiStoredAll(a *apiResult) bool {
	if a.load == "wrk" {
		return int64(a.created) >= a.ok && int64(a.created) <= a.ok+int64(a.clients)
	}
	return int64(a.created) == a.ok
}

func (b *bench) burstRows(add func(row), name string, r *burstResult, vsLimit func(float64) string) {
	settled := ""
	if !r.settled {
		settled = " (shards not settled before due)"
	}
	if r.attempts > 1 {
		settled += " (second attempt: registration overran the first due second)"
	}
	add(row{scenario: name, figure: "due second → last in asynq's pending list", value: secs(r.enq.last) + settled,
		vs: fmt.Sprintf("first at %s; registration %s", secs(r.enq.first), r.reg.Round(time.Millisecond))})
	t, ok := "", ""
	if r.warm && r.n >= 100000 {
		t, ok = "p99 ≤ 0.25 s at 100k", check(r.enq.complete && r.enq.p99 <= 250*time.Millisecond, "")
	}
	add(row{scenario: name, figure: "drift p50 / p99: runnable in asynq (pending list) − due", value: secs(r.enq.p50) + " / " + secs(r.enq.p99),
		target: t, ok: ok})
	if !r.warm {
		add(row{scenario: name, figure: "drift p50 / p99 / max: run records enqueued_at − run_at", value: secs(r.rec.p50) + " / " + secs(r.rec.p99) + " / " + secs(r.rec.max)})
	}
	fps := r.firesPerSec()
	vs := vsLimit(fps)
	p := b.peerFor(r.n)
	if p != nil && p.firesPerSec() > 0 && fps > 0 {
		same := ""
		if p.n != r.n {
			same = " (not the same N)"
		}
		vs += fmt.Sprintf(" · **%.2f× asynq.Scheduler %s**%s (%s)", fps/p.firesPerSec(), count(p.n), same, rate(p.firesPerSec()))
	}
	t, ok = "", ""
	if r.replicas == 1 {
		samePeer := p != nil && p.n == r.n && p.firesPerSec() > 0
		lim := b.res.limit
		switch {
		case r.warm:
			t = "≥ 5× peer"
			ok = check(samePeer && fps >= 5*p.firesPerSec(), "")
		default:
			t = "≥ 1.5× peer, ≥ 0.8× limit"
			ok = check(samePeer && lim != nil && lim.best > 0 && fps >= 1.5*p.firesPerSec() && fps >= 0.8*lim.best, "")
		}
	}
	vs += fmt.Sprintf(" · first→last %s", rate(between(r.n, r.enq)))
	add(row{scenario: name, figure: "fires/s (N ÷ due→last; first→last if earlier)", value: rate(fps), vs: strings.TrimPrefix(vs, " · "), target: t, ok: ok})
	add(row{scenario: name, figure: "exactly once: schedules with their one run; runs; asynq tasks; runs with a task",
		value:  fmt.Sprintf("%d/%d; %d; %d; %d", r.runsOK, r.n, r.runs, r.tasks, r.matched),
		target: "all equal N", ok: check(r.exactlyOnce(), "")})
	add(row{scenario: name, figure: "Redis latency: PING every 10 ms, p50 / p99 / max, due−1 s → last",
		value: ms(r.ping.p50) + " / " + ms(r.ping.p99) + " / " + ms(r.ping.max), vs: fmt.Sprintf("%d PINGs", r.ping.n),
		target: "p99 < 10 ms", ok: check(r.ping.n > 0 && r.ping.p99 < 10*time.Millisecond, "")})
	busy := ""
	if r.enq.complete && r.enq.last > -time.Second {
		busy = fmt.Sprintf(" (Redis %.0f%% of a core over due−1 s → last)", 100*r.redisCPU.Seconds()/(r.enq.last+time.Second).Seconds())
	}
	perRun := ""
	if r.n > 0 {
		perRun = fmt.Sprintf("Redis CPU per run %s; ", (r.redisCPU / time.Duration(r.n)).Round(100*time.Nanosecond))
	}
	add(row{scenario: name, figure: "scheduler CPU · peak RSS · Redis CPU, due−1 s → last enqueue",
		value: fmt.Sprintf("%s · %s · %s", secs(r.schedCPU), mb(r.schedHWM), secs(r.redisCPU)) + busy,
		vs:    perRun + fmt.Sprintf("%.0f B Redis per fired run (record + task)", r.bytesRun)})
}

// catchupRows reports a catch-up: its time, its commit calls and Redis's
// latency meanwhile.
func (b *bench) catchupRows(add func(row), c *catchupResult) {
	name := fmt.Sprintf("2 catch-up %s × %d missed", count(c.n), c.missed)
	want := c.n * c.missed
	perCall := ""
	if c.calls > 0 {
		perCall = fmt.Sprintf("%d script calls, %.0f runs per call", c.calls, float64(want)/float64(c.calls))
	}
	took := secs(c.took)
	if !c.complete {
		took += " (incomplete)"
	}
	add(row{scenario: name, figure: "scheduler start → all missed runs in asynq", value: took,
		vs: perCall + fmt.Sprintf(" · Redis CPU %s", secs(c.redisCPU))})
	add(row{scenario: name, figure: "Redis latency: PING every 10 ms, p50 / p99 / max",
		value: ms(c.ping.p50) + " / " + ms(c.ping.p99) + " / " + ms(c.ping.max), vs: fmt.Sprintf("%d PINGs", c.ping.n),
		target: "p99 < 10 ms", ok: check(c.ping.n > 0 && c.ping.p99 < 10*time.Millisecond, "")})
	add(row{scenario: name, figure: "exactly once: schedules with consecutive runs, none twice; runs; asynq tasks",
		value:  fmt.Sprintf("%d/%d; %d; %d", c.runsOK, c.n, c.runs, c.tasks),
		target: "all; runs = tasks", ok: check(c.exactlyOnce(), "")})
}

// peerFor is the largest peer size not above n.
func (b *bench) peerFor(n int) *peerResult {
	var best *peerResult
	for _, p := range b.res.peers {
		if p.n <= n && (best == nil || p.n > best.n) {
			best = p
		}
	}
	return best
}

func chronosVsPeer(bursts []*burstResult, p *peerResult) string {
	for _, r := range bursts {
		if r.n == p.n && r.replicas == 1 && r.enq.complete && r.enq.last > 0 {
			return fmt.Sprintf("chronos ×1 same N: %s", secs(r.enq.last))
		}
	}
	return ""
}

func dupVs(r *burstResult) string {
	if r == nil {
		return ""
	}
	return fmt.Sprintf("chronos ×%d: %d duplicate runs (%d schedules without exactly their one run)", r.replicas, r.extra, r.n-r.runsOK)
}

func (b *bench) notes() []string {
	var out []string
	note := func(scenario, text string) {
		if b.cfg.only[scenario] {
			out = append(out, text)
		}
	}
	note("burst", "Burst: schedules are registered through `queue.Store.UpsertSchedule` (64 goroutines) as `S M H * * *` in UTC, all due at one second, before `chronos scheduler` processes (LOOKAHEAD_MS=0, TICK_MS="+fmt.Sprint(b.cfg.tickMS)+", no launcher) start; Redis is flushed between scenarios. "+
		"\"In asynq\" times come from polling LLEN of asynq's pending list every 2 ms (the moment each task is visible; same method for asynq.Scheduler). "+
		"Run-record drift is `enqueued_at − run_at` as recorded: `enqueued_at` is the clock reading when the page's commit (which writes the task) was sent. "+
		"Exactly once: every schedule's runs are read back (`ListRuns`), each must be the one run planned at the due second, its idempotency key must be an asynq task, and the queue must hold N tasks after one more tick.")
	note("dup", "Dup: the chronos side is a burst with that many scheduler processes; the asynq.Scheduler replicas are started at one instant and measured at their first boundary, duplicates counted per entry from the pending tasks' payloads.")
	note("peer", "Peer: each asynq.Scheduler replica is a child process of this program (RSS from /proc/self/status, peak = VmHWM), measured at the first boundary of its spec with the same LLEN polling as the bursts.")
	note("steady", "Steady: one `chronos scheduler` with the default LOOKAHEAD_MS=60000 and launcher(s) with EXECUTOR=http to a no-op server in this process. Enqueue times are the first HSET of each asynq task hash (Redis keyspace notifications); \"lateness\" is max(0, enqueue − planned), the scheduler's own delay; \"drift\" is when a run became runnable (in asynq's pending list) − planned: for a run enqueued ahead, when it was moved there from the scheduled set (the second write of its task hash: schedulers forward due runs on each second, asynq's servers every 100 ms); this is the figure comparable to asynq.Scheduler's drift. \"Start delay\" is when the executor got the call minus the planned time: scheduler, asynq forwarding and launcher throughput together. CPU from /proc/<pid>/stat over exactly the measured periods.")
	note("footprint", fmt.Sprintf("Footprint: Redis `used_memory` delta after FLUSHALL per registered schedule (ids like the API's, 36 chars; daily cron); then %d runs per schedule are written with `queue.Store.Commit` (the scheduler's commit script: run hash, history and the asynq task), as RUN_HISTORY=%d keeps after that many fires; the asynq tasks each page wrote are deleted at once (bytes per task measured on the first page and reported separately: asynq keeps finished tasks for TASK_RETENTION, 24 h by default, so a once-a-minute schedule holds ~1440 of them). Idle CPU: one scheduler process, default settings, nothing due for 2 h.", b.cfg.footprintRuns, b.cfg.footprintRuns))
	note("launch", "Launch: the runs are pre-filled by a burst (real run records and tasks), then launcher processes with EXECUTOR=log at LOG_LEVEL=warn (no output, reports SUCCESS) start; the rate is timed from the first to the last finished task, so process start-up is excluded. Each round first drains as many raw tasks with as many asynq servers (same task options, TaskID and retention, and concurrency, in this process), then launches: per process, N launchers are held against N servers sharing the same cores, measured seconds apart (the machine's speed drifts by tens of percent within minutes). The round with the median ratio is shown (its rate, drain and CPU), with every round's ratio.")
	note("api", "API: `chronos api` (MONITORING=false), "+strconv.Itoa(b.cfg.apiClients)+" keep-alive connections, each request a new schedule (`*/5 * * * *`, Europe/Berlin); load generator, API and Redis share the machine. "+
		"The load generator is wrk (2 threads, -api-duration) when installed, else a Go loop of -api-n requests; wrk does not read bodies, so every 2xx is checked by counting the stored schedules (at most one per connection more than wrk counted: requests cut off at the end).")
	if r := b.biggestBurst(); r != nil && len(r.cmdstats) > 0 {
		out = append(out, fmt.Sprintf("Redis during the %s×%d burst (time inside Redis by command): %s.", count(r.n), r.replicas, formatCmdStats(r.cmdstats, 6)))
	}
	var ds []string
	for _, s := range scenarios {
		if d, ok := b.res.durations[s]; ok {
			ds = append(ds, fmt.Sprintf("%s %s (load average at start %s)", s, d.Round(time.Second), b.res.loads[s]))
		}
	}
	out = append(out, "Scenario wall time: "+strings.Join(ds, ", ")+". The machine is shared: other processes' load shows in the load averages.")
	return out
}

func (b *bench) biggestBurst() *burstResult {
	var best *burstResult
	for _, r := range b.res.bursts {
		if r.replicas == 1 && (best == nil || r.n > best.n) {
			best = r
		}
	}
	return best
}

func check(ok bool, detail string) string {
	s := "✗"
	if ok {
		s = "✓"
	}
	if detail != "" {
		s += " " + detail
	}
	return s
}

func rate(f float64) string {
	switch {
	case f == 0:
		return "—"
	case f >= 1000:
		return fmt.Sprintf("%.1fk/s", f/1000)
	default:
		return fmt.Sprintf("%.0f/s", f)
	}
}

func secs(d time.Duration) string { return fmt.Sprintf("%.3f s", d.Seconds()) }

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func mb(kb int64) string { return fmt.Sprintf("%.0f MB", float64(kb)/1024) }

func pct(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

func count(n int) string {
	switch {
	case n >= 1000000 && n%1000000 == 0:
		return fmt.Sprintf("%dM", n/1000000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// between is the rate from the first to the last arrival of a curve.
func between(n int, c curve) float64 {
	if !c.complete || c.last <= c.first {
		return 0
	}
	return float64(n-1) / (c.last - c.first).Seconds()
}
