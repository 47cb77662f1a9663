package main

import (
	"context"
	"encoding/json"
	"log"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// With LOG_FORMAT=json every line is one JSON object with one component
// key, whoever logs it: the standard log package (asynqmon, pprof),
// net/http's ErrorLog and go-redis (issue 26 finding 7). No asynq
// component logs: launchers run no asynq server. Not parallel: it sets
// process-wide loggers.
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

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 3, buf.String())
	for _, line := range lines {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		require.LessOrEqual(t, strings.Count(line, `"component":`), 1, line)
	}
	require.Contains(t, lines[1], `"component":"http"`)
	require.Contains(t, lines[2], `"component":"redis"`)
}
