// Command chronos is the one binary of chronos: the API, scheduler and
// launcher processes, all of them in one process, a self-contained dev mode
// on an embedded Redis, and a preview tool for cron expressions.
//
// Every setting is an environment variable with a flag of the same
// meaning; run "chronos --help" or "chronos <command> --help".
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/alecthomas/kong"
)

func main() {
	var cli CLI
	kctx := kong.Parse(&cli,
		kong.Name("chronos"),
		kong.Description("A distributed scheduler on Redis: exactly one run per planned time."),
		kong.UsageOnError(),
	)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env := &Env{Stdout: os.Stdout, Stderr: os.Stderr}
	kctx.BindTo(ctx, (*context.Context)(nil))
	if err := kctx.Run(env); err != nil {
		fmt.Fprintln(os.Stderr, "chronos:", err)
		os.Exit(1)
	}
}
