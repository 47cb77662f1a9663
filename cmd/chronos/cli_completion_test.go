package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func jsonUnmarshalString(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// chronos completion prints each shell's hook, which runs this binary
// with COMP_LINE set.
func TestCLICompletionScripts(t *testing.T) {
	t.Parallel()
	bin, err := os.Executable()
	require.NoError(t, err)
	for shell, want := range map[string]string{
		"bash": "complete -o default -C " + bin + " chronos\n",
		"zsh":  "autoload -U +X bashcompinit && bashcompinit\ncomplete -o default -C " + bin + " chronos\n",
		"fish": "set -lx COMP_LINE (commandline -cp)",
	} {
		r := runCLI(t, "completion", shell)
		require.Equal(t, ExitOK, r.Code, r.Stderr)
		require.Contains(t, r.Stdout, want, shell)
	}
	require.Contains(t, runCLI(t, "completion", "fish").Stdout, `complete -f -c chronos -a "(__complete_chronos)"`)
	r := runCLI(t, "completion", "powershell")
	require.Equal(t, ExitUsage, r.Code)
}

// The shell's request (COMP_LINE) is answered from the command tree:
// commands, flags, enum values, and schedule ids read from the API at
// CHRONOS_URL. (Not parallel: it sets the environment.)
func TestCLICompletionAnswers(t *testing.T) {
	b := setupCLI(t)
	for _, id := range []string{"alpha", "beta"} {
		b.ok("schedule", "upsert", "--id", id, "--workflow", "w", "--version", "1", "--user", "me", "--cron", "0 9 * * *")
	}
	defer func(d time.Duration) { completionTimeout = d }(completionTimeout)
	completionTimeout = time.Minute // a loaded machine; the ids must come
	t.Setenv("CHRONOS_URL", b.base)
	t.Setenv("CHRONOS_TOKEN", b.admin)
	complete := func(line string) []string {
		t.Helper()
		t.Setenv("COMP_LINE", line)
		t.Setenv("COMP_POINT", "")
		r := runCLI(t, "ignored")
		require.Equal(t, ExitOK, r.Code, r.Stderr)
		return strings.Fields(r.Stdout)
	}
	require.ElementsMatch(t, []string{"schedule", "scheduler"}, complete("chronos sch"))
	require.ElementsMatch(t, []string{"list", "get", "upsert", "pause", "resume", "delete", "runs", "trigger", "backfill"},
		complete("chronos schedule "))
	require.ElementsMatch(t, []string{"add", "list", "cancel"}, complete("chronos alarm "))
	require.ElementsMatch(t, []string{"json", "table"}, complete("chronos schedule list -o "))
	require.Subset(t, complete("chronos schedule list --"), []string{"--output", "--limit", "--all", "--url", "--token"})
	require.ElementsMatch(t, []string{"alpha", "beta"}, complete("chronos schedule get "))
	require.Equal(t, []string{"beta"}, complete("chronos schedule pause b"))
	require.ElementsMatch(t, []string{"bash", "zsh", "fish"}, complete("chronos completion "))
}
