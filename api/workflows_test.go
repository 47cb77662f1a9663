package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api"
	"github.com/chronos-sched/chronos/queue"
)

func TestWorkflows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dag := `{"nodes": [{"id": "a"}, {"id": "b", "after": ["a"]}], "note": "kept as sent"}`

	ref := ok[api.WorkflowRef](t, b, http.StatusOK, http.MethodPut, "/workflows/wf-1/versions/3", dag)
	require.Equal(t, api.WorkflowRef{WorkflowID: "wf-1", Version: "3"}, ref)

	rec := b.do(t, http.MethodGet, "/workflows/wf-1/versions/3", nil)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, dag, rec.Body.String())
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))

	// Versions are separate; a PUT replaces.
	requireError(t, b.do(t, http.MethodGet, "/workflows/wf-1/versions/4", nil), http.StatusNotFound, api.CodeNotFound, "workflow wf-1 version 4: not found")
	ok[api.WorkflowRef](t, b, http.StatusOK, http.MethodPut, "/workflows/wf-1/versions/3", `{"nodes": []}`)
	require.Equal(t, `{"nodes": []}`, b.do(t, http.MethodGet, "/workflows/wf-1/versions/3", nil).Body.String())

	// Path parameters are unescaped.
	ok[api.WorkflowRef](t, b, http.StatusOK, http.MethodPut, "/workflows/team%3Awf/versions/1.2", `{}`)
	require.Equal(t, `{}`, b.do(t, http.MethodGet, "/workflows/team:wf/versions/1.2", nil).Body.String())

	before := b.keys(t)
	for _, body := range []string{``, `[]`, `"dag"`, `42`, `{"a":`, `{} {}`, `null`} {
		requireError(t, b.do(t, http.MethodPut, "/workflows/wf-2/versions/1", body), http.StatusBadRequest, api.CodeInvalidArgument, "body: must be a JSON object")
	}
	requireError(t, b.do(t, http.MethodPut, "/workflows/wf%20x/versions/1", `{}`), http.StatusBadRequest, api.CodeInvalidArgument, "workflow_id: must not contain whitespace")
	// '}' ends the hash tag of the key: a}:b version c would share a key
	// with a version b}:c.
	requireError(t, b.do(t, http.MethodPut, "/workflows/a%7D:b/versions/c", `{}`), http.StatusBadRequest, api.CodeInvalidArgument, "workflow_id: must not contain '}'")
	requireError(t, b.do(t, http.MethodPut, "/workflows/a%FF/versions/c", `{}`), http.StatusBadRequest, api.CodeInvalidArgument, "workflow_id: must be valid UTF-8")
	require.ElementsMatch(t, before, b.keys(t))
	requireError(t, b.do(t, http.MethodGet, "/workflows/wf-2/versions/1", nil), http.StatusNotFound, api.CodeNotFound, "")
}

// TestWorkflowQuotaAndDelete (issue 26 finding 7): the workflow store had
// no quota and no delete. A DAG over WorkflowMaxBytes is a 413, a new
// version past WorkflowMaxVersions a 507 quota_exceeded (replacing one is
// not), and DELETE frees its place.
func TestWorkflowQuotaAndDelete(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{queue: &queue.Config{WorkflowMaxBytes: 64, WorkflowMaxVersions: 2}})
	ok[api.WorkflowRef](t, b, http.StatusOK, http.MethodPut, "/workflows/wf/versions/1", `{"v":1}`)
	ok[api.WorkflowRef](t, b, http.StatusOK, http.MethodPut, "/workflows/wf/versions/2", `{"v":2}`)
	before := b.keys(t)

	requireError(t, b.do(t, http.MethodPut, "/workflows/wf/versions/3", `{"v":3}`), http.StatusInsufficientStorage, api.CodeQuotaExceeded,
		"workflow wf version 3: 2 versions are stored, the most allowed: delete some first")
	requireError(t, b.do(t, http.MethodPut, "/workflows/wf/versions/1", `{"pad":"`+strings.Repeat("x", 64)+`"}`),
		http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge, "workflow wf version 1: DAG of 74 bytes, over the 64 a version may hold")
	require.ElementsMatch(t, before, b.keys(t), "a refused put writes nothing")
	ok[api.WorkflowRef](t, b, http.StatusOK, http.MethodPut, "/workflows/wf/versions/2", `{"v":"2b"}`) // a replacement fits

	rec := b.do(t, http.MethodDelete, "/workflows/wf/versions/1", nil)
	require.Equal(t, http.StatusNoContent, rec.Code, rec.Body.String())
	requireError(t, b.do(t, http.MethodGet, "/workflows/wf/versions/1", nil), http.StatusNotFound, api.CodeNotFound, "workflow wf version 1: not found")
	requireError(t, b.do(t, http.MethodDelete, "/workflows/wf/versions/1", nil), http.StatusNotFound, api.CodeNotFound, "workflow wf version 1: not found")
	requireError(t, b.do(t, http.MethodDelete, "/workflows/w%20f/versions/1", nil), http.StatusBadRequest, api.CodeInvalidArgument, "workflow_id: must not contain whitespace")
	ok[api.WorkflowRef](t, b, http.StatusOK, http.MethodPut, "/workflows/wf/versions/3", `{"v":3}`)
	require.Equal(t, `{"v":3}`, b.do(t, http.MethodGet, "/workflows/wf/versions/3", nil).Body.String())
}
