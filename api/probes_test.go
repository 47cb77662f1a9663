package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api"
)

// Probes come every few seconds: a passing one is logged at debug, a
// failing one at warn; other requests at debug, or info with AccessLog.
func TestProbesAreLoggedAtDebug(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		accessLog bool
		want      string
	}{{false, "DEBUG"}, {true, "INFO"}} {
		t.Run(tc.want, func(t *testing.T) {
			t.Parallel()
			testRequestLogLevels(t, tc.accessLog, tc.want)
		})
	}
}

func testRequestLogLevels(t *testing.T, accessLog bool, want string) {
	var logs bytes.Buffer
	stopping := make(chan struct{})
	b := setup(t, setupOpts{log: &logs, jsonLog: true, cfg: &api.Config{Stopping: stopping, AccessLog: accessLog}})
	ok[map[string]string](t, b, http.StatusOK, http.MethodGet, "/healthz", nil)
	ok[map[string]string](t, b, http.StatusOK, http.MethodGet, "/readyz", nil)
	b.do(t, http.MethodGet, "/schedules/missing", nil)
	close(stopping)
	requireError(t, b.do(t, http.MethodGet, "/readyz", nil), http.StatusServiceUnavailable, api.CodeUnavailable, "stopping")

	levels := map[string][]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		if m["msg"] == "http request" {
			path, _ := m["path"].(string)
			level, _ := m["level"].(string)
			levels[path] = append(levels[path], level)
		}
	}
	require.Equal(t, []string{"DEBUG"}, levels["/healthz"])
	require.Equal(t, []string{"DEBUG", "WARN"}, levels["/readyz"])
	require.Equal(t, []string{want}, levels["/schedules/missing"])
}
