package api

import (
	"time"

	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
)

// ManualStartResponse is the body of POST /run-launcher/start.
type ManualStartResponse struct {
	// Started is false when a run with the idempotency key already
	// existed; Run is then that run.
	Started bool       `json:"started"`
	Run     *model.Run `json:"run"`
}

// getRun shows one run: GET /runs/:idempotency_key.
func (s *server) getRun(c echo.Context) error {
	key, err := pathID(c, "idempotency_key", "idempotency_key")
	if err != nil {
		return err
	}
	run, _, err := s.store.GetRun(c.Request().Context(), key)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, run)
}

// reportStatus records a run's status: POST /runs/:idempotency_key/status.
// Reporting a final status again is a no-op (200); a different final
// status after a final one is a conflict (409).
func (s *server) reportStatus(c echo.Context) error {
	key, err := pathID(c, "idempotency_key", "idempotency_key")
	if err != nil {
		return err
	}
	o, err := s.readObject(c)
	if err != nil {
		return err
	}
	var errs model.FieldErrors
	errs.Add(o.unknown("status", "run_id", "error"))
	str := keep[string](&errs)
	st := str(o.str("status"))
	var status model.RunStatus
	switch {
	case errs.Has("status"):
	case st == "":
		errs.Add(fieldError("status", "is required"))
	default:
		if status, err = model.ParseReportedStatus(st); err != nil {
			errs.Add(fieldError("status", "%s", err.Error()))
		}
	}
	runID := str(boundedString(o, "run_id", false))
	msg := str(o.str("error"))
	if err := errs.Err(); err != nil {
		return err
	}
	u := queue.StatusUpdate{Status: status, RunID: runID, Error: msg}
	if status == model.RunFailed {
		u.Reason = model.ReasonExecutorRejected // the executor says the run failed
	}
	run, err := s.store.UpdateRunStatus(c.Request().Context(), key, u)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, run)
}

// startManualRun triggers a run outside any schedule:
// POST /run-launcher/start.
func (s *server) startManualRun(c echo.Context) error {
	o, err := s.readObject(c)
	if err != nil {
		return err
	}
	var errs model.FieldErrors
	errs.Add(o.unknown("workflow_id", "version", "user_id", "scheduled_for", "idempotency_key"))
	wf, ver, user := workflowTarget(o, &errs)
	at := keep[*time.Time](&errs)(o.timestamp("scheduled_for"))
	if at == nil && !errs.Has("scheduled_for") {
		errs.Add(fieldError("scheduled_for", "is required"))
	}
	key := keep[string](&errs)(optionalID(o, "idempotency_key"))
	if err := errs.Err(); err != nil {
		return err
	}
	if key == "" {
		key = model.ManualRunKey(wf, ver, *at)
	} else if err := model.ValidateManualKey(key, wf, ver, *at); err != nil {
		return err // a schedule's future run's key: taking it would take over that run
	}
	run, started, err := s.store.StartManualRun(c.Request().Context(), queue.ManualRun{
		WorkflowID: wf, Version: string(ver), UserID: user, ScheduledFor: *at, IdempotencyKey: key,
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ManualStartResponse{Started: started, Run: run})
}
