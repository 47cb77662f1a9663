package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// tourCommands returns the shell commands of the README's tour: the lines
// of its sh blocks between the tour markers, comments and blanks left out.
func tourCommands(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(readme), "<!-- tour:begin -->")
	require.True(t, ok, "README.md has no <!-- tour:begin --> marker")
	tour, _, ok := strings.Cut(rest, "<!-- tour:end -->")
	require.True(t, ok, "README.md has no <!-- tour:end --> marker")
	var cmds []string
	inBlock := false
	for line := range strings.SplitSeq(tour, "\n") {
		switch {
		case strings.HasPrefix(line, "```sh"):
			inBlock = true
		case strings.HasPrefix(line, "```"):
			inBlock = false
		case inBlock && strings.TrimSpace(line) != "" && !strings.HasPrefix(strings.TrimSpace(line), "#"):
			cmds = append(cmds, strings.TrimSpace(line))
		}
	}
	require.NotEmpty(t, cmds, "the README's tour has no command")
	return cmds
}

// TestReadmeTour runs the README's five-minute tour, command by command,
// against chronos dev, so the README cannot drift from the binary: each
// curl must answer 2xx with JSON, and the tour must end by showing a run
// that fired and succeeded.
func TestReadmeTour(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("the README tour needs curl (apt-get install curl)")
	}
	_, base := startInProcessAt(t, "dev", "--http-addr", "127.0.0.1:0", "--log-level", "warn")
	addr := strings.TrimPrefix(base, "http://")

	cmds := tourCommands(t)
	var last string
	for i, cmd := range cmds {
		if n, ok := strings.CutPrefix(cmd, "sleep "); ok {
			// Waiting for a run to fire: the next command is polled
			// instead, for as long as the sleep and a margin for a
			// loaded machine.
			secs, err := strconv.Atoi(n)
			require.NoError(t, err, "tour line %q", cmd)
			require.Less(t, i+1, len(cmds), "the tour ends with a sleep")
			deadline := time.Now().Add(time.Duration(secs)*time.Second + 30*time.Second)
			next := cmds[i+1]
			poll := time.NewTicker(500 * time.Millisecond)
			for ; ; <-poll.C {
				last = runTourCommand(t, next, addr)
				if strings.Contains(last, `"status":"SUCCESS"`) || time.Now().After(deadline) {
					break
				}
			}
			poll.Stop()
			continue
		}
		if i > 0 && strings.HasPrefix(cmds[i-1], "sleep ") {
			continue // polled above
		}
		last = runTourCommand(t, cmd, addr)
	}
	var runs struct {
		Runs []struct {
			Status string `json:"status"`
		} `json:"runs"`
	}
	require.NoError(t, json.Unmarshal([]byte(last), &runs), "the tour's last answer: %s", last)
	require.NotEmpty(t, runs.Runs, "the tour's last command shows no run: %s", last)
	require.Equal(t, "SUCCESS", runs.Runs[0].Status, "the tour's last command shows a run that fired: %s", last)
}

// runTourCommand runs one tour command against addr with curl failing on
// an HTTP error, and requires a JSON answer.
func runTourCommand(t *testing.T, cmd, addr string) string {
	t.Helper()
	line := strings.ReplaceAll(cmd, "localhost:8080", addr)
	line = strings.Replace(line, "curl ", "curl -sS --fail-with-body ", 1)
	out, err := exec.Command("sh", "-c", line).CombinedOutput()
	require.NoError(t, err, "tour command %q: %s", cmd, out)
	require.True(t, json.Valid(out), "tour command %q answered no JSON: %s", cmd, out)
	return string(out)
}
