package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api"
)

// TestTextFieldsRefuseWhatCannotBeShownFaithfully (issue 26 finding 7):
// invalid UTF-8 in a JSON string was stored rewritten to U+FFFD, user_id
// took NUL and newlines, and ids took bidi overrides and zero-width
// characters. Each is a 400 naming the field, and nothing is written.
func TestTextFieldsRefuseWhatCannotBeShownFaithfully(t *testing.T) {
	t.Parallel()
	b := setup(t)
	before := b.keys(t)
	for _, tc := range []struct {
		name, body, want string
	}{
		{"RawInvalidUTF8", "{\"schedule_id\":\"a\xffb\",\"workflow_id\":\"w\",\"version\":1,\"user_id\":\"u\",\"cron_expr\":\"* * * * *\"}",
			"schedule_id: must be valid UTF-8"},
		{"LoneSurrogate", `{"schedule_id":"a\ud800b","workflow_id":"w","version":1,"user_id":"u","cron_expr":"* * * * *"}`,
			"schedule_id: must be valid UTF-8"},
		{"WorkflowInvalidUTF8", "{\"workflow_id\":\"w\xc3\",\"version\":1,\"user_id\":\"u\",\"cron_expr\":\"* * * * *\"}",
			"workflow_id: must be valid UTF-8"},
		{"UserNUL", `{"workflow_id":"w","version":1,"user_id":"u\u0000x","cron_expr":"* * * * *"}`,
			"user_id: must not contain control characters"},
		{"UserNewline", `{"workflow_id":"w","version":1,"user_id":"u\nlevel=ERROR msg=forged","cron_expr":"* * * * *"}`,
			"user_id: must not contain control characters"},
		{"UserBidi", `{"workflow_id":"w","version":1,"user_id":"u\u202ex","cron_expr":"* * * * *"}`,
			"user_id: must not contain invisible format characters (bidi overrides, zero-width characters), found U+202E"},
		{"IDBidi", `{"schedule_id":"abc\u202edef","workflow_id":"w","version":1,"user_id":"u","cron_expr":"* * * * *"}`,
			"schedule_id: must not contain invisible format characters"},
		{"IDZeroWidth", `{"schedule_id":"ab\u200bc","workflow_id":"w","version":1,"user_id":"u","cron_expr":"* * * * *"}`,
			"schedule_id: must not contain invisible format characters (bidi overrides, zero-width characters), found U+200B"},
		{"WorkflowBOM", `{"workflow_id":"\ufeffw","version":1,"user_id":"u","cron_expr":"* * * * *"}`,
			"workflow_id: must not contain invisible format characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requireError(t, b.do(t, http.MethodPost, "/schedules/upsert", tc.body), http.StatusBadRequest, api.CodeInvalidArgument, tc.want)
		})
	}
	requireError(t, b.do(t, http.MethodGet, "/schedules/a%E2%80%AEb", nil), http.StatusBadRequest, api.CodeInvalidArgument,
		"schedule_id: must not contain invisible format characters")
	require.ElementsMatch(t, before, b.keys(t), "a refused request writes nothing")

	// A literal U+FFFD, escaped or not, is a character like any other;
	// user_id may hold spaces and any script.
	for _, body := range []string{
		`{"schedule_id":"a\ufffdb","workflow_id":"w","version":1,"user_id":"Zoë Ångström","cron_expr":"* * * * *"}`,
		"{\"schedule_id\":\"c\uFFFDd\",\"workflow_id\":\"w\",\"version\":1,\"user_id\":\"名前\",\"cron_expr\":\"* * * * *\"}",
	} {
		ok[api.UpsertResponse](t, b, http.StatusOK, http.MethodPost, "/schedules/upsert", body)
	}
}

// TestBadPercentEscapeInQuery: echo drops a query pair whose escape is
// bad, so "cron_expr=%zz" read as "cron_expr: is required"; it now says
// what is wrong.
func TestBadPercentEscapeInQuery(t *testing.T) {
	t.Parallel()
	b := setup(t)
	requireError(t, b.do(t, http.MethodGet, "/v1/preview?cron_expr=%zz", nil), http.StatusBadRequest, api.CodeInvalidArgument,
		`cron_expr: invalid percent escape in "%zz" (write a literal % as %25)`)
	requireError(t, b.do(t, http.MethodGet, "/v1/preview?cron_expr=*+*+*+*+*&count=5%", nil), http.StatusBadRequest, api.CodeInvalidArgument,
		`count: invalid percent escape in "5%"`)
	requireError(t, b.do(t, http.MethodGet, "/schedules?lim%zzit=5", nil), http.StatusBadRequest, api.CodeInvalidArgument,
		`query: invalid percent escape in parameter name "lim%zzit"`)
	requireError(t, b.do(t, http.MethodGet, "/v1/preview?cron_expr=*+*+*+*+*;count=5", nil), http.StatusBadRequest, api.CodeInvalidArgument,
		`query: "cron_expr=*+*+*+*+*;count=5": separate parameters with '&', not ';'`)
	ok[map[string]any](t, b, http.StatusOK, http.MethodGet, "/v1/preview?cron_expr=*+*+*+*+*&count=5", nil)
}
