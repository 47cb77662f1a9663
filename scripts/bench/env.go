package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/queue/queuetest"
)

// env is what every scenario runs against: one Redis, the chronos binary,
// a temp dir for process logs and the set of processes started so far (all
// stopped by env.close, also on error and panic).
type env struct {
	redisAddr string
	rdb       *redis.Client
	bin       string // chronos binary
	self      string // this program, for the asynq.Scheduler child processes
	dir       string // process logs
	shards    int
	tickMS    int
	logf      func(format string, args ...any)

	mu    sync.Mutex
	procs map[*proc]struct{}
}

func (e *env) url() string { return "redis://" + e.redisAddr }

// flush empties Redis between scenarios.
func (e *env) flush(ctx context.Context) error {
	return e.rdb.FlushAll(ctx).Err()
}

// close stops every process still running.
func (e *env) close() {
	e.mu.Lock()
	ps := make([]*proc, 0, len(e.procs))
	for p := range e.procs {
		ps = append(ps, p)
	}
	e.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Go(func() { p.stop(5 * time.Second) })
	}
	wg.Wait()
}

// proc is a child process: a chronos replica, a redis-server or an
// asynq.Scheduler child.
type proc struct {
	name     string
	cmd      *exec.Cmd
	logPath  string
	httpAddr string
	done     chan struct{}
	err      error
	env      *env
	stdin    io.WriteCloser
	stdout   *bufio.Reader
	closers  []io.Closer // our ends of the stdio pipes, closed by stop
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, waits up to grace, then SIGKILLs.
func (p *proc) stop(grace time.Duration) {
	if p == nil {
		return
	}
	if !p.exited() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	for _, c := range p.closers {
		c.Close()
	}
	if p.env != nil {
		p.env.mu.Lock()
		delete(p.env.procs, p)
		p.env.mu.Unlock()
	}
}

// logTail returns the last lines of the process's log, for error messages.
func (p *proc) logTail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// spawn starts a child process with the given environment (nothing is
// inherited but PATH, HOME, TMPDIR and GOMAXPROCS), logging stderr (and stdout unless
// pipeStdout) to a file. The child dies with this process (Pdeathsig).
func (e *env) spawn(name string, bin string, args []string, vars map[string]string, pipeStdio bool) (*proc, error) {
	logPath := filepath.Join(e.dir, fmt.Sprintf("%s-%d.log", name, time.Now().UnixNano()))
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = baseEnv()
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	p := &proc{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{}), env: e}
	var childEnds []*os.File
	if pipeStdio {
		// os.Pipe rather than cmd.StdoutPipe: Wait closes the latter as soon
		// as the child exits, losing its last lines.
		inR, inW, err := os.Pipe()
		if err != nil {
			logf.Close()
			return nil, err
		}
		outR, outW, err := os.Pipe()
		if err != nil {
			logf.Close()
			inR.Close()
			inW.Close()
			return nil, err
		}
		cmd.Stdin, cmd.Stdout = inR, outW
		childEnds = []*os.File{inR, outW}
		p.stdin, p.stdout = inW, bufio.NewReaderSize(outR, 1<<20)
		p.closers = []io.Closer{inW, outR}
	} else {
		cmd.Stdout = logf
	}
	err = cmd.Start()
	for _, f := range childEnds {
		f.Close()
	}
	if err != nil {
		logf.Close()
		for _, c := range p.closers {
			c.Close()
		}
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	e.mu.Lock()
	e.procs[p] = struct{}{}
	e.mu.Unlock()
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

func baseEnv() []string {
	var out []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "GOMAXPROCS"} {
		if v, ok := os.LookupEnv(k); ok {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// startChronos starts `chronos <role>` on the bench Redis with its own
// HTTP port, and waits for /healthz. A port chosen free can be taken
// before chronos binds it: then chronos exits at start, and it is started
// again on another port.
func (e *env) startChronos(ctx context.Context, role string, vars map[string]string) (*proc, error) {
	for attempt := 1; ; attempt++ {
		p, err := e.startChronosOnce(ctx, role, vars)
		if err == nil || attempt == 5 || !errors.Is(err, errPortTaken) {
			return p, err
		}
	}
}

// errPortTaken: the process exited at start because its port was taken.
var errPortTaken = errors.New("port taken")

// exitedOnTakenPort reports whether p has exited, and with errPortTaken
// when its log says its address was in use.
func (p *proc) exitedOnTakenPort() (bool, error) {
	if !p.exited() {
		return false, nil
	}
	tail := p.logTail(10)
	err := fmt.Errorf("%s exited at start: %v\n%s", p.name, p.err, tail)
	if strings.Contains(tail, "address already in use") {
		err = fmt.Errorf("%w: %w", errPortTaken, err)
	}
	return true, err
}

func (e *env) startChronosOnce(ctx context.Context, role string, vars map[string]string) (*proc, error) {
	port, err := queuetest.Port()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	all := map[string]string{
		"REDIS_URL": e.url(),
		"HTTP_ADDR": addr,
		"SHARDS":    strconv.Itoa(e.shards),
		"LOG_LEVEL": "warn",
		"TICK_MS":   strconv.Itoa(e.tickMS),
		// The bench measures chronos, not its access control.
		"INSECURE":   "true",
		"RATE_LIMIT": "0",
	}
	for k, v := range vars {
		all[k] = v
	}
	p, err := e.spawn("chronos-"+role, e.bin, []string{role}, all, false)
	if err != nil {
		return nil, err
	}
	p.httpAddr = addr
	deadline := time.Now().Add(20 * time.Second)
	client := &http.Client{Timeout: time.Second}
	for {
		if gone, err := p.exitedOnTakenPort(); gone {
			return nil, err
		}
		resp, err := client.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			// Whoever took the port may be what answered: ours, then,
			// exits as soon as its bind fails.
			if resp.StatusCode == http.StatusOK && sleepCtx(ctx, 100*time.Millisecond) == nil && !p.exited() {
				return p, nil
			}
		}
		if time.Now().After(deadline) {
			p.stop(2 * time.Second)
			return nil, fmt.Errorf("chronos %s not healthy on %s within 20s\n%s", role, addr, p.logTail(10))
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			p.stop(2 * time.Second)
			return nil, err
		}
	}
}

// metric reads one unlabelled gauge or counter from a process's /metrics.
func (p *proc) metric(name string) (float64, error) {
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get("http://" + p.httpAddr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(rest), 64)
		}
	}
	return 0, fmt.Errorf("metric %s not found on %s", name, p.httpAddr)
}

// waitShards waits until the scheduler processes together own every shard,
// each at most its fair share: the state a burst should start from.
func (e *env) waitShards(ctx context.Context, scheds []*proc, deadline time.Time) bool {
	share := (e.shards + len(scheds) - 1) / len(scheds)
	for {
		sum, fair := 0, true
		for _, p := range scheds {
			v, err := p.metric("chronos_shards_owned")
			if err != nil {
				fair = false
				break
			}
			sum += int(v)
			if int(v) > share {
				fair = false
			}
		}
		if fair && sum == e.shards {
			return true
		}
		if time.Now().After(deadline) || sleepCtx(ctx, 100*time.Millisecond) != nil {
			return false
		}
	}
}

// procStat is a process's CPU time and memory, from /proc.
type procStat struct {
	cpu   time.Duration // utime + stime
	rssKB int64         // VmRSS
	hwmKB int64         // VmHWM: peak RSS
}

func readProcStat(pid int) (procStat, error) {
	var st procStat
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return st, err
	}
	// Fields after the command name (which may contain spaces) start at ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return st, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return st, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	stt, _ := strconv.ParseInt(f[12], 10, 64)
	const clkTck = 100 // USER_HZ on Linux
	st.cpu = time.Duration(ut+stt) * time.Second / clkTck
	b, err = os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return st, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			st.rssKB = n
		case "VmHWM":
			st.hwmKB = n
		}
	}
	return st, nil
}

// startRedis starts redis-server on a free loopback port, persistence off.
func (e *env) startRedis(ctx context.Context) (*proc, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found on PATH (apt-get install -y redis-server): %w", err)
	}
	for attempt := 0; attempt < 5; attempt++ {
		port, err := queuetest.Port()
		if err != nil {
			return nil, err
		}
		p, err := e.spawn("redis", bin, queuetest.RedisArgs(port, e.dir), nil, false)
		if err != nil {
			return nil, err
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		err = queuetest.WaitRedis(ctx, addr, 10*time.Second, p.exited)
		if err == nil {
			err = queuetest.AnswersAs(ctx, addr, p.cmd.Process.Pid)
		}
		if err == nil {
			e.redisAddr = addr
			return p, nil
		}
		p.stop(time.Second)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return nil, errors.New("could not start redis-server after 5 attempts")
}

// redisInfo reads one field of INFO.
func redisInfo(ctx context.Context, rdb *redis.Client, section, field string) string {
	s, err := rdb.Info(ctx, section).Result()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(s, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	return ""
}

func usedMemory(ctx context.Context, rdb *redis.Client) int64 {
	n, _ := strconv.ParseInt(redisInfo(ctx, rdb, "memory", "used_memory"), 10, 64)
	return n
}

// redisCPU is the Redis server's CPU time (user + sys).
func redisCPU(ctx context.Context, rdb *redis.Client) time.Duration {
	s, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0
	}
	var total float64
	for _, line := range strings.Split(s, "\r\n") {
		k, v, _ := strings.Cut(line, ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			f, _ := strconv.ParseFloat(v, 64)
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func sleepUntil(ctx context.Context, t time.Time) error {
	return sleepCtx(ctx, time.Until(t))
}
