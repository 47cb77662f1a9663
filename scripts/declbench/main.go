// Command declbench measures how soon the declarative scheduler starts
// callbacks after their minute boundary: N tasks all due at one minute,
// trivial callbacks, start delay = the callback's clock minus the
// boundary. It prints p50, p99 and max at each size, with one process and
// with two processes sharing the tasks (each task must start exactly once
// between them).
//
//	go run ./scripts/declbench                       # 1k, 10k, 100k; 1 and 2 processes
//	go run ./scripts/declbench -sizes 10000 -procs 2
//
// It starts its own redis-server on a free port unless -redis is given.
// The processes' clocks are the host's, shifted so that the boundary comes
// a few seconds after they have initialized: time passes at its real pace.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/scheduler/declarative"
)

func main() {
	var err error
	if len(os.Args) > 1 && os.Args[1] == "child" {
		err = child(os.Args[2:])
	} else {
		err = parent(os.Args[1:], os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "declbench:", err)
		os.Exit(1)
	}
}

// target is the boundary every task is due at, in the processes' shifted
// time: any whole minute works.
var target = time.Date(2031, 1, 1, 12, 0, 0, 0, time.UTC)

// parent runs every size and process count and prints the table.
func parent(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("declbench", flag.ContinueOnError)
	sizesFlag := fs.String("sizes", "1000,10000,100000", "task counts")
	procsFlag := fs.String("procs", "1,2", "process counts sharing the tasks")
	redisURL := fs.String("redis", "", "Redis URL (default: start a redis-server on a free port)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	sizes, err := ints(*sizesFlag)
	if err != nil {
		return fmt.Errorf("-sizes: %w", err)
	}
	procs, err := ints(*procsFlag)
	if err != nil {
		return fmt.Errorf("-procs: %w", err)
	}
	dir, err := os.MkdirTemp("", "declbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if *redisURL == "" {
		url, stop, err := startRedis(dir)
		if err != nil {
			return err
		}
		defer stop()
		*redisURL = url
	}
	opt, err := redis.ParseURL(*redisURL)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()

	fmt.Fprintf(out, "declarative start delay after the minute boundary (trivial callbacks, %d CPUs)\n", runtime.NumCPU())
	fmt.Fprintf(out, "%8s %6s %9s %9s %9s %9s %s\n", "tasks", "procs", "p50", "p99", "max", "started", "within")
	for _, n := range sizes {
		for _, p := range procs {
			if err := rdb.FlushDB(context.Background()).Err(); err != nil {
				return err
			}
			delays, err := measure(*redisURL, dir, n, p)
			if err != nil {
				return fmt.Errorf("%d tasks, %d procs: %w", n, p, err)
			}
			slices.Sort(delays)
			bound := 5 * time.Second
			if n <= 10000 {
				bound = time.Second
			}
			verdict := "ok"
			if len(delays) != n {
				verdict = fmt.Sprintf("WRONG COUNT: %d starts for %d tasks", len(delays), n)
			} else if delays[len(delays)-1] > bound {
				verdict = "over " + bound.String()
			}
			fmt.Fprintf(out, "%8d %6d %9s %9s %9s %9d %s (%s)\n", n, p, pct(delays, 50), pct(delays, 99), pct(delays, 100), len(delays), bound, verdict)
		}
	}
	return nil
}

// measure runs procs child processes over n tasks and returns every start
// delay they saw.
func measure(redisURL, dir string, n, procs int) ([]time.Duration, error) {
	// Leave time to initialize: loading and writing n task records.
	prep := 4*time.Second + time.Duration(n/10000)*time.Second*time.Duration(procs)
	boundary := time.Now().Add(prep)
	offset := target.Sub(boundary)
	ns := fmt.Sprintf("bench-%d-%d", n, procs)
	var cmds []*exec.Cmd
	var files []string
	for i := range procs {
		f := filepath.Join(dir, fmt.Sprintf("%s-%d.txt", ns, i))
		files = append(files, f)
		cmd := exec.Command(os.Args[0], "child", "-redis", redisURL, "-ns", ns, "-n", strconv.Itoa(n),
			"-offset", offset.String(), "-out", f)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		cmds = append(cmds, cmd)
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			return nil, fmt.Errorf("child: %w", err)
		}
	}
	var all []time.Duration
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, l := range strings.Fields(string(b)) {
			us, err := strconv.ParseInt(l, 10, 64)
			if err != nil {
				return nil, err
			}
			all = append(all, time.Duration(us)*time.Microsecond)
		}
	}
	return all, nil
}

// shiftedClock is the host's clock plus an offset.
type shiftedClock struct{ offset time.Duration }

func (c shiftedClock) Now() time.Time                         { return time.Now().Add(c.offset) }
func (c shiftedClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// child initializes n tasks due at target, records each callback's start
// delay, and writes them (microseconds, one per line) once the runs are
// over.
func child(args []string) error {
	fs := flag.NewFlagSet("child", flag.ContinueOnError)
	redisURL := fs.String("redis", "", "")
	ns := fs.String("ns", "", "")
	n := fs.Int("n", 0, "")
	offset := fs.Duration("offset", 0, "")
	outPath := fs.String("out", "", "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opt, err := redis.ParseURL(*redisURL)
	if err != nil {
		return err
	}
	opt.PoolSize = 32
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	clock := shiftedClock{*offset}
	s, err := declarative.New(declarative.Options{
		Redis: rdb, Namespace: *ns, Clock: clock, Location: time.UTC,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	delays := make([]int64, *n)
	var got atomic.Int64
	cb := func(context.Context) error {
		d := clock.Now().Sub(target)
		if i := got.Add(1) - 1; int(i) < len(delays) {
			delays[i] = d.Microseconds()
		}
		return nil
	}
	expr := fmt.Sprintf("%d %d * * *", target.Minute(), target.Hour())
	regs := make([]declarative.Registration, *n)
	for i := range regs {
		regs[i] = declarative.Registration{Name: "t" + strconv.Itoa(i), Cron: expr, Callback: cb}
	}
	ctx := context.Background()
	if err := s.Initialize(ctx, regs); err != nil {
		return err
	}
	if now := clock.Now(); !now.Before(target) {
		return fmt.Errorf("initialized %s after the boundary: give it more time", now.Sub(target))
	}
	// Every run is over well within this (the other process may have
	// taken some of them, so do not wait for n).
	time.Sleep(clock.Now().Sub(target)*-1 + 12*time.Second)
	if err := s.Stop(ctx); err != nil {
		return err
	}
	f, err := os.Create(*outPath)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for _, d := range delays[:min(int(got.Load()), len(delays))] {
		fmt.Fprintln(w, d)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// startRedis starts a redis-server without persistence on a free port.
func startRedis(dir string) (string, func(), error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", nil, fmt.Errorf("redis-server not found on PATH: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	url := fmt.Sprintf("redis://127.0.0.1:%d", port)
	opt, _ := redis.ParseURL(url)
	c := redis.NewClient(opt)
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c.Ping(context.Background()).Err() == nil {
			return url, stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("redis-server on port %d did not answer", port)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pct returns the p-th percentile of sorted ds.
func pct(ds []time.Duration, p int) string {
	if len(ds) == 0 {
		return "-"
	}
	i := min(len(ds)*p/100, len(ds)-1)
	return ds[i].Round(time.Millisecond).String()
}

func ints(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}
