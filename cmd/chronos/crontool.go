package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/chronos-sched/chronos/api/auth"
	"github.com/chronos-sched/chronos/api/crontool"
	"github.com/chronos-sched/chronos/api/crontool/nanobot"
)

// The cron tool's commands (chronos mcp, import nanobot, export nanobot)
// talk to a chronos API, not to Redis: the owner of the jobs is the
// subject of a verified token, as for every agent's request, and the API
// applies the same checks, limits and idempotency as to the tool's calls.
// So they run wherever the agent or its operator is, with nothing but a
// URL and a token.

// ClientOpts are how a command reaches a chronos API: as an agent
// (alarms, the cron tool) or as a service (schedules, workflows).
type ClientOpts struct {
	URL   string `name:"url" env:"CHRONOS_URL" default:"http://127.0.0.1:8080" help:"Base URL of the chronos API."`
	Token string `name:"token" env:"CHRONOS_TOKEN" help:"Bearer token. For alarms, mcp, import and export: an agent's, whose sub is its DID (did:matrix:<user_id>:<keyfp>), the owner of the jobs; for schedule and workflow: one with their scopes (chronos dev needs none). Prefer the environment to the flag (ps shows flags)."`
}

// OwnerOpts let an operator act for an owner without the owner's token,
// by minting a short one with the API's signing key.
type OwnerOpts struct {
	Owner  string `name:"owner" help:"The agent's DID whose jobs these are. With CHRONOS_TOKEN it must be the token's sub; without, a 5-minute token for it is minted with AUTH_JWT_SECRET or AUTH_JWT_PRIVATE_KEY."`
	Secret string `name:"auth-jwt-secret" env:"AUTH_JWT_SECRET" help:"HS256 secret to mint the --owner token with (the API's)."`
	Key    string `name:"auth-jwt-private-key" env:"AUTH_JWT_PRIVATE_KEY" help:"Ed25519 or RSA private key to mint the --owner token with instead (PEM text or a path)."`
	Issuer string `name:"auth-jwt-issuer" env:"AUTH_JWT_ISSUER" help:"iss of the minted token."`
	Aud    string `name:"auth-jwt-audience" env:"AUTH_JWT_AUDIENCE" help:"aud of the minted token."`
}

// ownerTokenTTL is the life of a token minted for --owner: one command.
const ownerTokenTTL = 5 * time.Minute

// token decides the bearer token of a command for o.Owner.
func (o OwnerOpts) token(c ClientOpts) (string, error) {
	if o.Owner == "" {
		if c.Token == "" {
			return "", errNoToken
		}
		return c.Token, nil
	}
	if _, err := auth.ParseDID(o.Owner); err != nil {
		return "", usageErrorf("--owner: %w", err)
	}
	if c.Token != "" {
		if sub := tokenSubject(c.Token); sub != o.Owner {
			return "", usageErrorf("--owner %s is not CHRONOS_TOKEN's sub (%q): the API acts for the token's sub; drop --owner, or CHRONOS_TOKEN to mint one", o.Owner, sub)
		}
		return c.Token, nil
	}
	key, err := signingKey(o.Secret, o.Key,
		errors.New("--owner without CHRONOS_TOKEN mints a token, and needs AUTH_JWT_SECRET or AUTH_JWT_PRIVATE_KEY to sign it"))
	if err != nil {
		return "", &exitError{code: ExitAuth, err: err}
	}
	return auth.Mint(auth.Grant{Subject: o.Owner, TTL: ownerTokenTTL, Issuer: o.Issuer, Audience: o.Aud}, []byte(o.Secret), key)
}

var errNoToken error = &exitError{code: ExitAuth, err: errors.New("no token: set CHRONOS_TOKEN to a token whose sub is the agent's DID " +
	"(`chronos token --sub did:matrix:<user_id>:<keyfp> --scope schedules:read` mints one; chronos dev prints one), or pass --owner")}

// tokenSubject reads a JWT's sub without verifying it (the API does);
// "" when it cannot.
func tokenSubject(tok string) string {
	var c jwt.RegisteredClaims
	if _, _, err := jwt.NewParser().ParseUnverified(tok, &c); err != nil {
		return ""
	}
	return c.Subject
}

// MCPCmd serves the cron tool to an MCP client over stdio.
type MCPCmd struct {
	ClientOpts
	LogLevel string `name:"log-level" env:"LOG_LEVEL" default:"warn" enum:"debug,info,warn,error" help:"Log level (stderr; stdout is the protocol's)."`
}

// Run serves MCP on stdin and stdout until the client closes them.
func (c *MCPCmd) Run(ctx context.Context, env *Env) error {
	if c.Token == "" {
		return errNoToken
	}
	cl := newAPIClient(c.URL, c.Token)
	raw, err := cl.do(ctx, http.MethodGet, "/v1/tools/cron/schema", nil)
	if err != nil {
		return err
	}
	var def crontool.Definition
	if err := json.Unmarshal(raw, &def); err != nil {
		return fmt.Errorf("GET /v1/tools/cron/schema: %w", err)
	}
	srv, err := crontool.NewMCPServer(mcpImplementation(), def,
		func(ctx context.Context, _ *mcp.CallToolRequest, args json.RawMessage) (*crontool.Result, error) {
			b, err := cl.do(ctx, http.MethodPost, "/v1/tools/cron", args)
			if err != nil {
				return nil, err
			}
			var res crontool.Result
			if err := json.Unmarshal(b, &res); err != nil {
				return nil, fmt.Errorf("POST /v1/tools/cron: %w", err)
			}
			return &res, nil
		})
	if err != nil {
		return err
	}
	level := map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}[c.LogLevel]
	logger := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: level}))
	logger.Info("chronos mcp: serving cron_add, cron_list and cron_remove on stdio", "chronos_url", c.URL)
	err = srv.Run(ctx, &mcp.StdioTransport{})
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// mcpImplementation names chronos to MCP clients.
func mcpImplementation() *mcp.Implementation {
	return &mcp.Implementation{Name: "chronos", Title: "chronos cron tool", Version: "1"}
}

// ImportCmd imports jobs from another scheduler.
type ImportCmd struct {
	Nanobot ImportNanobotCmd `cmd:"" help:"Import a nanobot jobs.json as the owner's jobs: idempotent (a job's id is its alarm's idempotency key), disabled jobs stay disabled; each skipped job is reported with why."`
}

// ImportNanobotCmd imports a nanobot jobs.json.
type ImportNanobotCmd struct {
	File string `arg:"" help:"The jobs.json to import (nanobot keeps it at ~/.nanobot/cron/jobs.json); - for stdin."`
	ClientOpts
	OwnerOpts
}

// Run imports the file and prints a line per job.
func (c *ImportNanobotCmd) Run(ctx context.Context, env *Env) error {
	var data []byte
	var err error
	if c.File == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(c.File)
	}
	if err != nil {
		return err
	}
	// Read here first, so a file that is not a jobs.json is said so
	// before anything is sent.
	if _, err := nanobot.Decode(data); err != nil {
		return fmt.Errorf("%s: %w", c.File, err)
	}
	tok, err := c.token(c.ClientOpts)
	if err != nil {
		return err
	}
	b, err := newAPIClient(c.URL, tok).do(ctx, http.MethodPost, "/v1/tools/cron/import", data)
	if err != nil {
		return err
	}
	var rep crontool.ImportReport
	if err := json.Unmarshal(b, &rep); err != nil {
		return fmt.Errorf("POST /v1/tools/cron/import: %w", err)
	}
	for _, j := range rep.Jobs {
		line := fmt.Sprintf("%s %q: %s", cmpOr(j.ID, fmt.Sprintf("#%d", j.Index)), j.Name, j.Outcome)
		switch {
		case j.Outcome == crontool.OutcomeSkipped:
			line += ": " + j.Reason
		case !j.Enabled:
			line += " (disabled)"
		}
		if j.Note != "" {
			line += "; " + j.Note
		}
		fmt.Fprintln(env.Stdout, line)
	}
	fmt.Fprintf(env.Stdout, "%d imported, %d already imported, %d skipped\n", rep.Imported, rep.Existing, rep.Skipped)
	return nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// ExportCmd exports jobs in another scheduler's format.
type ExportCmd struct {
	Nanobot ExportNanobotCmd `cmd:"" help:"Write the owner's jobs as a nanobot jobs.json on stdout, as nanobot's own writer writes it."`
}

// ExportNanobotCmd exports a nanobot jobs.json.
type ExportNanobotCmd struct {
	ClientOpts
	OwnerOpts
}

// Run writes the jobs.json to stdout.
func (c *ExportNanobotCmd) Run(ctx context.Context, env *Env) error {
	tok, err := c.token(c.ClientOpts)
	if err != nil {
		return err
	}
	b, err := newAPIClient(c.URL, tok).do(ctx, http.MethodGet, "/v1/tools/cron/export", nil)
	if err != nil {
		return err
	}
	_, err = env.Stdout.Write(b)
	return err
}
