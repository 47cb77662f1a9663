package nanobot

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// Encode writes f as nanobot's Python writer does:
// json.dumps(data, indent=2, ensure_ascii=False), with no newline at the
// end. f.Version is written as Version whatever it holds; f.Invalid is
// not written (nanobot could not have read those jobs either).
func Encode(f *File) []byte {
	w := &writer{}
	w.open('{')
	w.key("version")
	w.raw(strconv.Itoa(Version))
	w.key("jobs")
	if len(f.Jobs) == 0 {
		w.raw("[]")
	} else {
		w.open('[')
		for _, j := range f.Jobs {
			w.item()
			writeJob(w, &j)
		}
		w.close(']')
	}
	w.close('}')
	return w.buf.Bytes()
}

func writeJob(w *writer, j *Job) {
	w.open('{')
	w.key("id")
	w.str(j.ID)
	w.key("name")
	w.str(j.Name)
	w.key("enabled")
	w.bool(j.Enabled)
	w.key("schedule")
	w.open('{')
	w.key("kind")
	w.str(j.Schedule.Kind)
	w.key("atMs")
	w.optInt(j.Schedule.AtMs)
	w.key("everyMs")
	w.optInt(j.Schedule.EveryMs)
	w.key("expr")
	w.optStr(j.Schedule.Expr)
	w.key("tz")
	w.optStr(j.Schedule.TZ)
	w.close('}')
	w.key("payload")
	w.open('{')
	w.key("kind")
	w.str(j.Payload.Kind)
	w.key("message")
	w.str(j.Payload.Message)
	w.key("deliver")
	w.bool(j.Payload.Deliver)
	w.key("channel")
	w.optStr(j.Payload.Channel)
	w.key("to")
	w.optStr(j.Payload.To)
	w.close('}')
	w.key("state")
	w.open('{')
	w.key("nextRunAtMs")
	w.optInt(j.State.NextRunAtMs)
	w.key("lastRunAtMs")
	w.optInt(j.State.LastRunAtMs)
	w.key("lastStatus")
	w.optStr(j.State.LastStatus)
	w.key("lastError")
	w.optStr(j.State.LastError)
	w.close('}')
	w.key("createdAtMs")
	w.raw(strconv.FormatInt(j.CreatedAtMs, 10))
	w.key("updatedAtMs")
	w.raw(strconv.FormatInt(j.UpdatedAtMs, 10))
	w.key("deleteAfterRun")
	w.bool(j.DeleteAfterRun)
	w.close('}')
}

// writer writes JSON with Python's indent=2 layout: each member and
// element on its own line, indented two spaces a level; ",\n" between
// members, ": " after a key.
type writer struct {
	buf   bytes.Buffer
	depth int
	first []bool // per open container: no member written yet
}

func (w *writer) newline() {
	w.buf.WriteByte('\n')
	for range w.depth {
		w.buf.WriteString("  ")
	}
}

func (w *writer) open(c byte) {
	w.buf.WriteByte(c)
	w.depth++
	w.first = append(w.first, true)
}

func (w *writer) close(c byte) {
	w.depth--
	w.first = w.first[:len(w.first)-1]
	w.newline()
	w.buf.WriteByte(c)
}

// item starts a member or element.
func (w *writer) item() {
	top := len(w.first) - 1
	if !w.first[top] {
		w.buf.WriteByte(',')
	}
	w.first[top] = false
	w.newline()
}

func (w *writer) key(k string) {
	w.item()
	w.str(k)
	w.buf.WriteString(": ")
}

func (w *writer) raw(s string) { w.buf.WriteString(s) }

func (w *writer) bool(b bool) {
	if b {
		w.raw("true")
	} else {
		w.raw("false")
	}
}

func (w *writer) optInt(n *int64) {
	if n == nil {
		w.raw("null")
		return
	}
	w.raw(strconv.FormatInt(*n, 10))
}

func (w *writer) optStr(s *string) {
	if s == nil {
		w.raw("null")
		return
	}
	w.str(*s)
}

// str writes s as Python's json module does with ensure_ascii=False: only
// the quote, the backslash and control characters below U+0020 are
// escaped (\n \r \t \b \f by name, the rest as \u00xx), everything else,
// U+2028 and "<" included, is written as it is. Bytes that are not UTF-8
// (which a Go string may hold but JSON cannot) become U+FFFD, as
// encoding/json writes them.
func (w *writer) str(s string) {
	b := &w.buf
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString("\ufffd")
			i++
			continue
		}
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20:
			const hex = "0123456789abcdef"
			b.WriteString(`\u00`)
			b.WriteByte(hex[r>>4])
			b.WriteByte(hex[r&0xf])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	b.WriteByte('"')
}
