package auth

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Scope is one permission a token grants.
type Scope string

// The scopes chronos knows.
const (
	// ScopeSchedulesRead reads schedules, runs, previews and the OpenAPI
	// document.
	ScopeSchedulesRead Scope = "schedules:read"
	// ScopeSchedulesWrite creates, updates and pauses schedules.
	ScopeSchedulesWrite Scope = "schedules:write"
	// ScopeRunsWrite reports a run's status: what executors hold.
	ScopeRunsWrite Scope = "runs:write"
	// ScopeAdmin grants every scope: the workflow store, manual runs,
	// deletes, metrics, profiling and a writable dashboard.
	ScopeAdmin Scope = "admin"
)

// KnownScopes lists the scopes chronos grants, in the order of the docs.
var KnownScopes = []Scope{ScopeSchedulesRead, ScopeSchedulesWrite, ScopeRunsWrite, ScopeAdmin}

// Scopes is the set of scopes of a token.
type Scopes []Scope

// Has reports whether the scopes grant s; admin grants every scope.
func (ss Scopes) Has(s Scope) bool {
	return slices.Contains(ss, s) || slices.Contains(ss, ScopeAdmin)
}

// String joins the scopes with spaces, as the scope claim does.
func (ss Scopes) String() string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = string(s)
	}
	return strings.Join(parts, " ")
}

// ParseScopes reads a space- or comma-separated list of scopes, refusing
// one chronos does not know (a typo would otherwise mint a useless token).
func ParseScopes(text string) (Scopes, error) {
	fields := strings.FieldsFunc(text, func(r rune) bool { return r == ' ' || r == ',' })
	if len(fields) == 0 {
		return nil, fmt.Errorf("scope: is required (one or more of %s)", KnownScopes)
	}
	var ss Scopes
	for _, f := range fields {
		s := Scope(f)
		if !slices.Contains(KnownScopes, s) {
			return nil, fmt.Errorf("scope: unknown scope %q (want one or more of %s)", f, Scopes(KnownScopes))
		}
		if !slices.Contains(ss, s) {
			ss = append(ss, s)
		}
	}
	return ss, nil
}

// scopeClaim is the scope claim: a space-separated string (OAuth, RFC
// 8693) or a list of strings. Unknown scopes are kept and grant nothing.
type scopeClaim Scopes

func (sc *scopeClaim) UnmarshalJSON(b []byte) error {
	var text string
	if err := json.Unmarshal(b, &text); err == nil {
		*sc = nil
		for _, f := range strings.Fields(text) {
			*sc = append(*sc, Scope(f))
		}
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return fmt.Errorf("scope: want a space-separated string or a list of strings")
	}
	*sc = nil
	for _, s := range list {
		*sc = append(*sc, Scope(s))
	}
	return nil
}

func (sc scopeClaim) MarshalJSON() ([]byte, error) {
	return json.Marshal(Scopes(sc).String())
}
