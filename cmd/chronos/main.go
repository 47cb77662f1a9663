// Command chronos is the one binary of chronos: the API, scheduler and
// launcher processes, all of them in one process, a self-contained dev mode
// on an embedded Redis, and a preview tool for cron expressions.
//
// Every setting is an environment variable with a flag of the same
// meaning; run "chronos --help" or "chronos <command> --help".
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/alecthomas/kong"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go forceExitOnSecondSignal(ctx, stop)
	if err := execute(ctx, os.Args[1:], &Env{Stdout: os.Stdout, Stderr: os.Stderr}); err != nil {
		fmt.Fprintln(os.Stderr, "chronos:", err)
		os.Exit(exitCode(err)) // client.go: what each status means
	}
}

// forceExitOnSecondSignal waits for the first SIGINT or SIGTERM (ctx
// ends, and shutdown begins), then exits at once on a second one: an
// operator who presses Ctrl-C again does not want to wait out
// SHUTDOWN_TIMEOUT.
func forceExitOnSecondSignal(ctx context.Context, stop func()) {
	<-ctx.Done()
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt, syscall.SIGTERM) // before stop: no signal falls between
	stop()
	sig := <-again
	fmt.Fprintf(os.Stderr, "chronos: a second signal (%s) during shutdown: exiting now, abandoning the work in progress\n", sig)
	os.Exit(2)
}

// execute parses args (flags and environment) and runs the command; tests
// call it with their own context and writers.
func execute(ctx context.Context, args []string, env *Env) error {
	var cli CLI
	parser, err := kong.New(&cli,
		kong.Name("chronos"),
		kong.Description("A distributed scheduler on Redis: exactly one run per planned time."),
		kong.UsageOnError(),
		kong.ExplicitGroups([]kong.Group{{Key: "client", Title: "Commands for people and scripts, through a chronos API (docs/cli.md):"}}),
		kong.Writers(env.Stdout, env.Stderr),
		kong.BindTo(ctx, (*context.Context)(nil)),
	)
	if err != nil {
		return err
	}
	if completeCommandLine(parser) {
		return nil
	}
	kctx, err := parser.Parse(args)
	if err != nil {
		return withEnvName(err)
	}
	return kctx.Run(env)
}

// withEnvName puts the environment variable before an error kong reports
// by flag name ("--executor must be one of ... but got "x"") when the
// value it got is that variable's. (kong names the variable itself for
// values it fails to parse, not for enums.)
func withEnvName(err error) error {
	var pe *kong.ParseError
	msg := err.Error()
	if !errors.As(err, &pe) || pe.Context == nil || strings.Contains(msg, "envar") {
		return err
	}
	for _, f := range pe.Context.Flags() {
		if !strings.HasPrefix(msg, "--"+f.Name+" ") {
			continue
		}
		for _, name := range f.Envs {
			if v, ok := os.LookupEnv(name); ok && strings.HasSuffix(msg, fmt.Sprintf("got %q", v)) {
				return fmt.Errorf("%s=%q: %w", name, v, err)
			}
		}
	}
	return err
}
