package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/alecthomas/kong"
	"github.com/posener/complete"
	"github.com/willabides/kongplete"

	"github.com/chronos-sched/chronos/api"
)

// Shell completion: the shell runs chronos itself with COMP_LINE set
// (bash's `complete -C`, and the same through zsh's bashcompinit and a
// fish function), and kongplete answers from the Kong model, before any
// parsing. `chronos completion <shell>` prints what the shell needs.

// CompletionCmd is `chronos completion`.
type CompletionCmd struct {
	Shell string `arg:"" enum:"bash,zsh,fish" help:"bash, zsh or fish."`
}

// completionScripts are the shells' hooks, with ${bin} the absolute path
// of this binary and ${cmd} its name (kongplete's InstallCompletions
// writes the same, for the login shell only).
var completionScripts = map[string]string{
	"bash": "complete -o default -C ${bin} ${cmd}\n",
	"zsh":  "autoload -U +X bashcompinit && bashcompinit\ncomplete -o default -C ${bin} ${cmd}\n",
	"fish": `function __complete_${cmd}
    set -lx COMP_LINE (commandline -cp)
    test -z (commandline -ct)
    and set COMP_LINE "$COMP_LINE "
    ${bin}
end
complete -f -c ${cmd} -a "(__complete_${cmd})"
`,
}

// Run prints the shell's completion script.
func (c *CompletionCmd) Run(env *Env) error {
	bin, err := os.Executable()
	if err == nil {
		bin, err = filepath.Abs(bin)
	}
	if err != nil {
		return fmt.Errorf("the path of this chronos binary: %w", err)
	}
	vars := map[string]string{"bin": bin, "cmd": "chronos"}
	_, err = fmt.Fprint(env.Stdout, os.Expand(completionScripts[c.Shell], func(k string) string {
		if v, ok := vars[k]; ok {
			return v
		}
		return "$" + k
	}))
	return err
}

// completeCommandLine answers a shell's completion request (COMP_LINE set) on
// parser's stdout and reports whether it did; without one it does
// nothing.
func completeCommandLine(parser *kong.Kong) bool {
	if os.Getenv("COMP_LINE") == "" {
		return false
	}
	kongplete.Complete(parser,
		kongplete.WithPredictor("schedule", predictIDs(schedulesIDs)),
		kongplete.WithPredictor("alarm", predictIDs(alarmIDs)),
		kongplete.WithPredictor("file", complete.PredictFiles("*")),
		kongplete.WithExitFunc(func(int) {}),
		kongplete.WithErrorHandler(func(err error) { fmt.Fprintln(parser.Stderr, "chronos: completion:", err) }),
	)
	return true
}

// completionTimeout bounds the API call of a completion: the shell waits.
// A variable for tests on a loaded machine.
var completionTimeout = 2 * time.Second

// predictIDs completes ids listed by the API at CHRONOS_URL with
// CHRONOS_TOKEN (flags on the line are not read); nothing when it does
// not answer in time.
func predictIDs(list func(ctx context.Context, cl *apiClient) []string) complete.Predictor {
	return complete.PredictFunc(func(a complete.Args) []string {
		ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
		defer cancel()
		base := os.Getenv("CHRONOS_URL")
		if base == "" {
			base = "http://127.0.0.1:8080"
		}
		var out []string
		for _, id := range list(ctx, newAPIClient(base, os.Getenv("CHRONOS_TOKEN"))) {
			if strings.HasPrefix(id, a.Last) {
				out = append(out, id)
			}
		}
		return out
	})
}

// schedulesIDs lists the first page of schedule ids.
func schedulesIDs(ctx context.Context, cl *apiClient) []string {
	var l api.ScheduleList
	if _, err := cl.getJSON(ctx, fmt.Sprintf("/schedules?limit=%d", api.ListLimitMax), &l); err != nil {
		return nil
	}
	ids := make([]string, len(l.Schedules))
	for i, s := range l.Schedules {
		ids[i] = s.ID
	}
	return ids
}

// alarmIDs lists the active alarms' ids of CHRONOS_TOKEN's agent.
func alarmIDs(ctx context.Context, cl *apiClient) []string {
	var l api.AlarmList
	if _, err := cl.getJSON(ctx, "/v1/alarms?status=active", &l); err != nil {
		return nil
	}
	ids := make([]string, len(l.Alarms))
	for i, a := range l.Alarms {
		ids[i] = a.ID
	}
	return ids
}
