package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"unicode"

	"github.com/labstack/echo/v4"
	mcpauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/chronos-sched/chronos/api/auth"
	"github.com/chronos-sched/chronos/api/crontool"
	"github.com/chronos-sched/chronos/api/crontool/nanobot"
	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
)

// The agent's cron tool (package crontool) over HTTP and MCP. Its routes
// are owner routes, as the alarms': the jobs are alarms of the token's
// DID.
const (
	routeCronTool   = "/v1/tools/cron"
	routeCronSchema = "/v1/tools/cron/schema"
	routeCronImport = "/v1/tools/cron/import"
	routeCronExport = "/v1/tools/cron/export"
	routeMCP        = "/mcp"
)

// cronRoutes are the cron tool's owner routes.
var cronRoutes = []string{routeCronTool, routeCronSchema, routeCronImport, routeCronExport, routeMCP}

// mountCronTool registers the cron tool's routes.
func (s *server) mountCronTool(e *echo.Echo) error {
	tool, err := crontool.New(cronStore{s}, &crontool.Config{DefaultTZ: s.cfg.CronToolTZ, Now: s.store.Clock().Now})
	if err != nil {
		return fmt.Errorf("api: Config.CronToolTZ: %w", err)
	}
	e.GET(routeCronSchema, func(c echo.Context) error { return c.JSON(http.StatusOK, tool.Definition()) })
	e.POST(routeCronTool, func(c echo.Context) error {
		did, err := owner(c)
		if err != nil {
			return err
		}
		body, err := s.readBody(c)
		if err != nil {
			return err
		}
		res, err := tool.Call(c.Request().Context(), did, body)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, res)
	})
	e.POST(routeCronImport, func(c echo.Context) error {
		did, err := owner(c)
		if err != nil {
			return err
		}
		body, err := s.readBody(c)
		if err != nil {
			return err
		}
		rep, err := tool.Import(c.Request().Context(), did, body)
		if err != nil {
			return err
		}
		s.log.InfoContext(c.Request().Context(), "nanobot jobs imported", slog.String("owner", did.Raw),
			slog.Int("imported", rep.Imported), slog.Int("already_imported", rep.Existing), slog.Int("skipped", rep.Skipped))
		return c.JSON(http.StatusOK, rep)
	})
	e.GET(routeCronExport, func(c echo.Context) error {
		did, err := owner(c)
		if err != nil {
			return err
		}
		f, err := tool.Export(c.Request().Context(), did)
		if err != nil {
			return err
		}
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSONCharsetUTF8, nanobot.Encode(f))
	})

	srv, err := crontool.NewMCPServer(&mcp.Implementation{Name: "chronos", Title: "chronos cron tool", Version: "1"},
		tool.Definition(), func(ctx context.Context, req *mcp.CallToolRequest, args json.RawMessage) (*crontool.Result, error) {
			did, err := mcpOwner(req)
			if err != nil {
				return nil, err
			}
			return tool.Call(ctx, did, args)
		})
	if err != nil {
		return err
	}
	// Stateless: every request stands alone, so any API replica behind a
	// load balancer answers any request of a client, with no session to
	// keep; the tools need nothing a session gives (no requests from
	// server to client, no subscriptions).
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: s.log, MaxRequestBodyBytes: s.cfg.BodyLimit})
	// The guard has verified the bearer token (an owner route); the SDK's
	// middleware hands its identity to the tool calls.
	withToken := mcpauth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*mcpauth.TokenInfo, error) {
		id, ok := auth.FromContext(ctx)
		if !ok {
			return nil, mcpauth.ErrInvalidToken
		}
		return &mcpauth.TokenInfo{UserID: id.Subject, Expiration: id.ExpiresAt}, nil
	}, nil)(h)
	e.POST(routeMCP, func(c echo.Context) error {
		if _, err := owner(c); err != nil {
			return err
		}
		withToken.ServeHTTP(c.Response(), c.Request())
		return nil
	})
	return nil
}

// mcpOwner is the DID of an MCP tool call's bearer token.
func mcpOwner(req *mcp.CallToolRequest) (auth.DID, error) {
	if req.Extra == nil || req.Extra.TokenInfo == nil {
		return auth.DID{}, errors.New("api: an MCP tool call without the caller's token")
	}
	return auth.ParseDID(req.Extra.TokenInfo.UserID)
}

// cronStore is the cron tool's view of the alarm store: an alarm made
// as POST /v1/alarms makes one, with the same limits.
type cronStore struct{ s *server }

func (c cronStore) CreateAlarm(ctx context.Context, rec *model.ScheduleRecord) (*model.ScheduleRecord, bool, error) {
	cfg := c.s.cfg
	rec.ID = c.s.store.NewAlarmID(rec.Owner)
	rec.OverlapPolicy, rec.CatchupPolicy = model.OverlapAllow, model.CatchupLatest
	if rec.Timezone == "" {
		rec.Timezone = "UTC"
	}
	a := rec.Alarm
	a.MaxFailures = cfg.AlarmMaxFailures
	switch {
	case len(a.Label) > cfg.AlarmLabelMaxBytes:
		return nil, false, cronErrorf("name: longer than %d bytes, got %d", cfg.AlarmLabelMaxBytes, len(a.Label))
	case strings.ContainsFunc(a.Label, unicode.IsControl):
		return nil, false, cronErrorf("name: must be one line, without control characters")
	case len(a.WakeMessage) > cfg.AlarmWakeMessageMaxBytes:
		return nil, false, cronErrorf("message: longer than %d bytes, got %d", cfg.AlarmWakeMessageMaxBytes, len(a.WakeMessage))
	case strings.ContainsFunc(a.WakeMessage, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' && r != '\r' }):
		return nil, false, cronErrorf("message: must not contain control characters other than newlines and tabs")
	case len(a.Payload) > cfg.AlarmPayloadMaxBytes:
		return nil, false, cronErrorf("channel and to: larger than the %d bytes an alarm's payload holds", cfg.AlarmPayloadMaxBytes)
	}
	if err := rec.Validate(); err != nil {
		return nil, false, err
	}
	got, deduped, err := c.s.store.CreateAlarm(ctx, rec)
	if errors.Is(err, queue.ErrQuota) {
		return nil, false, cronErrorf("%v", err)
	}
	return got, deduped, err
}

func (c cronStore) ListAlarms(ctx context.Context, owner string, status model.AlarmStatus) ([]*model.ScheduleRecord, error) {
	return c.s.store.ListAlarms(ctx, owner, status, queue.AlarmListMax)
}

func (c cronStore) CancelAlarm(ctx context.Context, owner, id string) error {
	_, err := c.s.store.CancelAlarm(ctx, owner, id)
	return err
}

func (c cronStore) PauseAlarm(ctx context.Context, owner, id string, paused bool) error {
	_, err := c.s.store.PauseAlarm(ctx, owner, id, paused)
	return err
}

// cronErrorf is a mistake of the tool's caller, answered as a result.
func cronErrorf(format string, args ...any) error {
	return &crontool.Error{Text: "Error: " + fmt.Sprintf(format, args...)}
}
