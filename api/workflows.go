package api

import (
	"bytes"
	"net/http"

	"github.com/labstack/echo/v4"
)

// WorkflowRef is the body of PUT /workflows/:id/versions/:version.
type WorkflowRef struct {
	WorkflowID string `json:"workflow_id"`
	Version    string `json:"version"`
}

// putWorkflow stores a workflow version's DAG, replacing any before:
// PUT /workflows/:id/versions/:version. The body must be a JSON object and
// is stored as sent.
func (s *server) putWorkflow(c echo.Context) error {
	id, err := pathID(c, "id", "workflow_id")
	if err != nil {
		return err
	}
	ver, err := pathID(c, "version", "version")
	if err != nil {
		return err
	}
	b, err := s.readBody(c)
	if err != nil {
		return err
	}
	if !isJSONObject(b) {
		return fieldError("body", "must be a JSON object (the workflow DAG)")
	}
	if err := s.store.PutWorkflow(c.Request().Context(), id, ver, bytes.TrimSpace(b)); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, WorkflowRef{WorkflowID: id, Version: ver})
}

// getWorkflow returns a workflow version's DAG as stored:
// GET /workflows/:id/versions/:version.
func (s *server) getWorkflow(c echo.Context) error {
	id, err := pathID(c, "id", "workflow_id")
	if err != nil {
		return err
	}
	ver, err := pathID(c, "version", "version")
	if err != nil {
		return err
	}
	dag, err := s.store.GetWorkflow(c.Request().Context(), id, ver)
	if err != nil {
		return err
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, dag)
}

// deleteWorkflow removes a workflow version's DAG:
// DELETE /workflows/:id/versions/:version. Runs of it fail from then on.
func (s *server) deleteWorkflow(c echo.Context) error {
	id, err := pathID(c, "id", "workflow_id")
	if err != nil {
		return err
	}
	ver, err := pathID(c, "version", "version")
	if err != nil {
		return err
	}
	if err := s.store.DeleteWorkflow(c.Request().Context(), id, ver); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
