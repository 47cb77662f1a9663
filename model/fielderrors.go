package model

import (
	"errors"
	"fmt"
	"strings"
)

// UnknownFieldError names a request field that chronos does not know, so
// that a typo ("tz") is an error rather than a setting silently left at its
// default.
type UnknownFieldError struct {
	Field string
	// Suggestion is the known field the caller probably meant; "" when
	// none is close.
	Suggestion string
}

func (e *UnknownFieldError) Error() string {
	if e.Suggestion != "" {
		return fmt.Sprintf("unknown field %q (did you mean %q?)", e.Field, e.Suggestion)
	}
	return fmt.Sprintf("unknown field %q", e.Field)
}

// FieldErrors is every field error of one request, in the order found, at
// most one per field. Callers go on checking after a failure so that a
// client learns of all its mistakes in one answer.
type FieldErrors []error

// Add appends err's field errors, skipping a field that already has one:
// a value that failed to decode then fails validation too, and the first
// reason is the useful one. Add(nil) does nothing.
func (fe *FieldErrors) Add(err error) {
	if err == nil {
		return
	}
	var many FieldErrors
	if errors.As(err, &many) {
		for _, e := range many {
			fe.Add(e)
		}
		return
	}
	f := ErrorField(err)
	for _, e := range *fe {
		if f != "" && ErrorField(e) == f {
			return
		}
	}
	*fe = append(*fe, err)
}

// Has reports whether field already has an error.
func (fe FieldErrors) Has(field string) bool {
	for _, e := range fe {
		if ErrorField(e) == field {
			return true
		}
	}
	return false
}

// Err returns nil, the only error, or the list.
func (fe FieldErrors) Err() error {
	switch len(fe) {
	case 0:
		return nil
	case 1:
		return fe[0]
	}
	return fe
}

// Unwrap lets errors.As find a *FieldError in the list (the first).
func (fe FieldErrors) Unwrap() []error { return fe }

func (fe FieldErrors) Error() string {
	msgs := make([]string, len(fe))
	for i, e := range fe {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "; ")
}

// ErrorField names the field an error is about: a *FieldError's or an
// *UnknownFieldError's field, "" for any other error.
func ErrorField(err error) string {
	var f *FieldError
	if errors.As(err, &f) {
		return f.Field
	}
	var u *UnknownFieldError
	if errors.As(err, &u) {
		return u.Field
	}
	return ""
}

// SuggestField returns the field of known that name most likely
// misspells or abbreviates, or "" when none is close: a case-insensitive
// match, then an edit distance of at most two, then a known field that
// contains name or that name's letters spell in order from the same first
// letter ("tz" for "timezone").
func SuggestField(name string, known []string) string {
	n := strings.ToLower(name)
	if n == "" {
		return ""
	}
	for _, k := range known {
		if strings.ToLower(k) == n {
			return k
		}
	}
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(n, k); d < bestD {
			best, bestD = k, d
		}
	}
	if best != "" {
		return best
	}
	for _, k := range known {
		if len(n) >= 3 && (strings.Contains(k, n) || strings.Contains(n, k)) {
			return k
		}
	}
	for _, k := range known {
		if k[0] == n[0] && isSubsequence(n, k) {
			return k
		}
	}
	return ""
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// isSubsequence reports whether s's bytes appear in t in order.
func isSubsequence(s, t string) bool {
	i := 0
	for j := 0; j < len(t) && i < len(s); j++ {
		if s[i] == t[j] {
			i++
		}
	}
	return i == len(s)
}
