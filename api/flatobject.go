package api

import (
	"encoding/json"
	"unicode/utf8"
)

// flatObject splits a body that is one JSON object of plain members, the
// shape almost every request has, into an object without encoding/json:
// its keys and string values hold no escape, control character or
// invalid UTF-8, and its values are such strings, numbers, true, false or
// null. ok is false for anything else (nested values, escapes, any
// syntax error), which json.Unmarshal then decodes, or refuses with its
// own message: so this changes the cost of the common case, never what a
// body means or which error it gets. json.Unmarshal's checking pass and
// reflection were 7% of an upsert's CPU.
//
// The values are slices of b, as json.RawMessage values; a later
// duplicate key wins, as with json.Unmarshal.
func flatObject(b []byte) (o object, ok bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	o = make(object, 8)
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return o, skipSpace(b, i+1) == len(b)
	}
	for {
		ks, ke, good := plainStringAt(b, i)
		if !good {
			return nil, false
		}
		i = skipSpace(b, ke)
		if i >= len(b) || b[i] != ':' {
			return nil, false
		}
		vs := skipSpace(b, i+1)
		ve, good := flatValueAt(b, vs)
		if !good {
			return nil, false
		}
		o[fieldName(b[ks+1:ke-1])] = json.RawMessage(b[vs:ve])
		i = skipSpace(b, ve)
		if i >= len(b) {
			return nil, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return o, skipSpace(b, i+1) == len(b)
		default:
			return nil, false
		}
	}
}

// fieldNames are the names of the fields the API's bodies take, each its
// own key: a body's keys are these strings, not copies made for each
// request (six allocations of an upsert).
var fieldNames = func() map[string]string {
	m := map[string]string{}
	for _, f := range upsertFields {
		m[f] = f
	}
	return m
}()

// fieldName returns the key b as a string: one of fieldNames, or a copy.
func fieldName(b []byte) string {
	if f, ok := fieldNames[string(b)]; ok { // the lookup does not copy b
		return f
	}
	return string(b)
}

// skipSpace returns the index of the first byte at or after i that is
// not JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// plainStringAt returns the bounds [start, end) of the string at b[i],
// quotes included, when it is plain (see plainString).
func plainStringAt(b []byte, i int) (start, end int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, 0, false
	}
	ascii := true
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			if !ascii && !utf8.Valid(b[i+1:j]) {
				return 0, 0, false
			}
			return i, j + 1, true
		case c < 0x20 || c == '\\':
			return 0, 0, false
		case c >= 0x80:
			ascii = false
		}
	}
	return 0, 0, false
}

// flatValueAt returns the end of the value at b[i] when it is a plain
// string, a number, true, false or null.
func flatValueAt(b []byte, i int) (end int, ok bool) {
	if i >= len(b) {
		return 0, false
	}
	switch c := b[i]; {
	case c == '"':
		_, end, ok = plainStringAt(b, i)
		return end, ok
	case c == '-' || (c >= '0' && c <= '9'):
		return numberAt(b, i)
	}
	for _, lit := range [...]string{"true", "false", "null"} {
		if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
			return i + len(lit), true
		}
	}
	return 0, false
}

// numberAt returns the end of the JSON number at b[i]:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func numberAt(b []byte, i int) (end int, ok bool) {
	digits := func(j int) int {
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		return j
	}
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(i)
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return 0, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}
