package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
)

// WorkflowCmd is `chronos workflow`: the workflow versions' DAGs that
// runs hand to the executor.
type WorkflowCmd struct {
	Put WorkflowPutCmd `cmd:"" help:"Store a workflow version's DAG, a JSON object, replacing any before (PUT /workflows/:id/versions/:version)."`
	Get WorkflowGetCmd `cmd:"" help:"Print a workflow version's DAG as stored (GET /workflows/:id/versions/:version)."`
}

// workflowPath is /workflows/<id>/versions/<version>, escaped.
func workflowPath(id, version string) string {
	return "/workflows/" + url.PathEscape(id) + "/versions/" + url.PathEscape(version)
}

// WorkflowPutCmd is `chronos workflow put`.
type WorkflowPutCmd struct {
	ID      string `arg:"" help:"The workflow's id."`
	Version string `arg:"" help:"The version."`
	File    string `arg:"" default:"-" predictor:"file" help:"The DAG: a file holding a JSON object; - (the default) reads stdin."`
	apiConn
}

// Run stores the DAG.
func (c *WorkflowPutCmd) Run(ctx context.Context, env *Env) error {
	var dag []byte
	var err error
	if c.File == "-" {
		dag, err = io.ReadAll(os.Stdin)
	} else {
		dag, err = os.ReadFile(c.File)
	}
	if err != nil {
		return usageErrorf("the DAG: %w", err)
	}
	if t := bytes.TrimSpace(dag); len(t) == 0 || t[0] != '{' || !json.Valid(t) {
		return usageErrorf("the DAG in %s must be a JSON object, e.g. {\"nodes\":[{\"id\":\"say-hi\"}]}", c.File)
	}
	b, err := c.client().do(ctx, http.MethodPut, workflowPath(c.ID, c.Version), dag)
	if err != nil {
		return err
	}
	if c.json() {
		return writeJSON(env.Stdout, b)
	}
	_, err = fmt.Fprintf(env.Stdout, "Workflow %s version %s stored (%d bytes).\n", c.ID, c.Version, len(bytes.TrimSpace(dag)))
	return err
}

// WorkflowGetCmd is `chronos workflow get`.
type WorkflowGetCmd struct {
	ID      string `arg:"" help:"The workflow's id."`
	Version string `arg:"" help:"The version."`
	apiConn
}

// Run prints the DAG: indented for people, as stored with -o json.
func (c *WorkflowGetCmd) Run(ctx context.Context, env *Env) error {
	b, err := c.client().do(ctx, http.MethodGet, workflowPath(c.ID, c.Version), nil)
	if err != nil {
		return withHint(err, http.StatusNotFound,
			"No workflow %s version %s: `chronos workflow put %s %s dag.json` stores it.", c.ID, c.Version, c.ID, c.Version)
	}
	if c.json() {
		return writeJSON(env.Stdout, b)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return writeJSON(env.Stdout, b)
	}
	return writeJSON(env.Stdout, out.Bytes())
}
