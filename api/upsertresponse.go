package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
)

// writeUpsertResponse answers an upsert with r as c.JSON would, byte for
// byte, written by hand: encoding/json's reflection over the response
// and its time was 5% of an upsert's CPU. ?pretty and echo's Debug, which
// indent, and any value appendJSON does not write itself go to c.JSON.
func writeUpsertResponse(c echo.Context, r *UpsertResponse) error {
	if c.Request().URL.RawQuery == "" && !c.Echo().Debug {
		buf := responseBufs.Get().(*[]byte)
		defer responseBufs.Put(buf)
		if b, ok := r.appendJSON((*buf)[:0]); ok {
			if cap(b) <= 4096 {
				*buf = b[:0] // kept, grown if it had to grow
			}
			return c.JSONBlob(http.StatusOK, b) // copied into the connection's buffer (or a recorder's)
		}
	}
	return c.JSON(http.StatusOK, r)
}

// responseBufs are the buffers upsert answers are written in, reused: a
// new one was an allocation an upsert.
var responseBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// appendJSON appends r as encoding/json's Encoder writes it (HTML
// escaped, a newline after); ok is false when a value needs what only
// encoding/json does (a time outside years 0 to 9999).
func (r *UpsertResponse) appendJSON(b []byte) ([]byte, bool) {
	b = append(b, `{"schedule_id":`...)
	b = appendJSONString(b, r.ScheduleID)
	b = append(b, `,"next_run_at":`...)
	if t := r.NextRunAt; t == nil {
		b = append(b, "null"...)
	} else {
		if y := t.Year(); y < 0 || y > 9999 {
			return nil, false
		}
		if _, off := t.Zone(); off%60 != 0 {
			return nil, false // a zone with seconds, which RFC 3339 cannot write
		}
		b = append(b, '"')
		b = t.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	b = append(b, `,"created":`...)
	b = strconv.AppendBool(b, r.Created)
	b = append(b, `,"changed":`...)
	b = strconv.AppendBool(b, r.Changed)
	b = append(b, `,"state":`...)
	b = appendJSONString(b, r.State)
	if len(r.Warnings) > 0 {
		b = append(b, `,"warnings":[`...)
		for i, w := range r.Warnings {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, w)
		}
		b = append(b, ']')
	}
	return append(b, "}\n"...), true
}

// appendJSONString appends s as a JSON string as encoding/json writes it:
// printable ASCII but for the characters it escapes is copied, anything
// else is left to json.Marshal.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
