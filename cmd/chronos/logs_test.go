package main

import (
	"context"
	"encoding/json"
	"log"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue/asynqwire"
)

// With LOG_FORMAT=json every line is one JSON object with one component
// key, whoever logs it: the standard log package (asynqmon, pprof),
// net/http's ErrorLog, go-redis and asynq (issue 26 finding 7). Not
// parallel: it sets process-wide loggers.
func TestLibraryLogsAreJSON(t *testing.T) {
	prev := slog.Default()
	t.Cleanup(func() { slog.SetDefault(prev) })
	var buf syncBuffer
	logger := newLogger(Common{LogLevel: "debug", LogFormat: "json"}, &Env{Stderr: &buf})
	routeLibraryLogs(logger)
	httpLog := httpErrorLog(logger)

	log.Printf("from the log package")
	httpLog.Printf("http: superfluous response.WriteHeader call")
	redisLogger{logger.With("component", "redis")}.Printf(context.Background(), "redis: connection pool: %s\n", "dial failed")
	asynqwire.Logger{L: logger.With("component", "launcher")}.Warn("asynq: lease lost")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 4, buf.String())
	for _, line := range lines {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		require.LessOrEqual(t, strings.Count(line, `"component":`), 1, line)
	}
	require.Contains(t, lines[1], `"component":"http"`)
	require.Contains(t, lines[2], `"component":"redis"`)
	require.Contains(t, lines[3], `"library":"asynq"`)
}
