package queuetest

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// The Redis cost benchmarks (cold burst, upsert, launched run, forward)
// measure what Redis spent between two readings of INFO: counts of
// commands, which do not vary with the machine's load, and CPU and
// microseconds, which do. With CALLGRIND=1 and a redis-server first on
// the PATH that runs the real one under valgrind --tool=callgrind, they
// also dump its instructions around the part measured (Callgrind).

// CommandStat is one command's line of INFO commandstats.
type CommandStat struct{ Calls, Usec float64 }

// RedisStats is one reading of a Redis's INFO commandstats, cpu and
// stats.
type RedisStats struct {
	// CPU is used_cpu_user plus used_cpu_sys, seconds.
	CPU float64
	// NetInputBytes is total_net_input_bytes.
	NetInputBytes float64
	// Cmds is each command's calls and microseconds, by its name in
	// INFO (evalsha, script|load).
	Cmds map[string]CommandStat
}

// ReadRedisStats reads rdb's INFO commandstats, cpu and stats.
func ReadRedisStats(tb testing.TB, rdb *redis.Client) RedisStats {
	tb.Helper()
	s, err := rdb.Info(context.Background(), "commandstats", "cpu", "stats").Result()
	if err != nil {
		tb.Fatalf("read INFO: %v", err)
	}
	out := RedisStats{Cmds: map[string]CommandStat{}}
	for _, line := range strings.Split(s, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch k {
		case "used_cpu_user", "used_cpu_sys":
			f, _ := strconv.ParseFloat(v, 64)
			out.CPU += f
		case "total_net_input_bytes":
			out.NetInputBytes, _ = strconv.ParseFloat(v, 64)
		}
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok {
			continue
		}
		var st CommandStat
		for _, f := range strings.Split(v, ",") {
			key, val, _ := strings.Cut(f, "=")
			switch key {
			case "calls":
				st.Calls, _ = strconv.ParseFloat(val, 64)
			case "usec":
				st.Usec, _ = strconv.ParseFloat(val, 64)
			}
		}
		out.Cmds[name] = st
	}
	return out
}

// Callgrind runs callgrind_control with arg (-z to zero the counts, -d
// to dump them) when CALLGRIND=1, on the redis-server rdb talks to: INFO
// gives its process id (valgrind execs in place), so another callgrind
// run on the machine is left alone.
func Callgrind(rdb *redis.Client, arg string) {
	if os.Getenv("CALLGRIND") != "1" {
		return
	}
	info, err := rdb.Info(context.Background(), "server").Result()
	if err != nil {
		return
	}
	for _, line := range strings.Split(info, "\r\n") {
		if pid, ok := strings.CutPrefix(line, "process_id:"); ok {
			_ = exec.Command("callgrind_control", arg, pid).Run()
		}
	}
}
