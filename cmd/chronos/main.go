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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := execute(ctx, os.Args[1:], &Env{Stdout: os.Stdout, Stderr: os.Stderr}); err != nil {
		fmt.Fprintln(os.Stderr, "chronos:", err)
		os.Exit(1)
	}
}

// execute parses args (flags and environment) and runs the command; tests
// call it with their own context and writers.
func execute(ctx context.Context, args []string, env *Env) error {
	var cli CLI
	parser, err := kong.New(&cli,
		kong.Name("chronos"),
		kong.Description("A distributed scheduler on Redis: exactly one run per planned time."),
		kong.UsageOnError(),
		kong.Writers(env.Stdout, env.Stderr),
		kong.BindTo(ctx, (*context.Context)(nil)),
	)
	if err != nil {
		return err
	}
	kctx, err := parser.Parse(args)
	if err != nil {
		return err
	}
	return kctx.Run(env)
}
