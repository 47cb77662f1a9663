package launcher

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// An alarm's run (its schedule's target is wake) starts no workflow: the
// launcher delivers the alarm's wake through the Waker, and a delivered
// wake is the run's SUCCESS. docs/wake.md is the receiver's side: the
// body, the signature and how to verify it.

// Wake is one delivery of an alarm: the JSON body POSTed to WAKE_URL.
// Payload and WakeMessage are the alarm's, byte for byte.
type Wake struct {
	AlarmID        string          `json:"alarm_id"`
	OwnerDID       string          `json:"owner_did"`
	UserID         string          `json:"user_id"`
	Label          string          `json:"label"`
	ConversationID string          `json:"conversation_id"`
	WakeMessage    string          `json:"wake_message"`
	Payload        json.RawMessage `json:"payload"`
	// ScheduledFor is the fire time the wake is for; FiredAt is when the
	// launcher started delivering it (later on a retry, or after a
	// catch-up).
	ScheduledFor time.Time `json:"scheduled_for"`
	FiredAt      time.Time `json:"fired_at"`
	// IdempotencyKey is the run's key: the same on every delivery of one
	// fire time of the alarm, and different for each fire time. Receivers
	// deduplicate on it (deliveries are at least once).
	IdempotencyKey string `json:"idempotency_key"`
}

// Body is the wake's JSON, with the payload exactly as stored. (Marshal
// would compact the payload and escape its <, > and &.) A payload that is
// not JSON is an error: the alarm's record is corrupt.
func (w *Wake) Body() ([]byte, error) {
	payload := w.Payload
	if len(payload) == 0 {
		payload = json.RawMessage("{}")
	}
	if !json.Valid(payload) {
		return nil, fmt.Errorf("alarm %s: its stored payload is not JSON", w.AlarmID)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	b.WriteByte('{')
	for i, f := range []struct {
		name string
		v    any
	}{
		{"alarm_id", w.AlarmID}, {"owner_did", w.OwnerDID}, {"user_id", w.UserID}, {"label", w.Label},
		{"conversation_id", w.ConversationID}, {"wake_message", w.WakeMessage}, {"payload", payload},
		{"scheduled_for", w.ScheduledFor.UTC()}, {"fired_at", w.FiredAt.UTC()}, {"idempotency_key", w.IdempotencyKey},
	} {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(f.name))
		b.WriteByte(':')
		if raw, ok := f.v.(json.RawMessage); ok {
			b.Write(raw)
			continue
		}
		if err := enc.Encode(f.v); err != nil {
			return nil, fmt.Errorf("encode the wake of alarm %s: %w", w.AlarmID, err)
		}
		b.Truncate(b.Len() - 1) // Encode ends each value with a newline
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Waker delivers wakes. It may be called more than once for one
// IdempotencyKey (delivery is at least once). A nil error means
// delivered; a *PermanentError is not retried; a *RetryAfterError is
// retried no sooner than it says; any other error is retried with
// backoff, up to the alarm's max_failures attempts in all.
type Waker interface {
	Wake(ctx context.Context, w Wake) error
}

// LogWaker is the wake executor of chronos dev without WAKE_URL: it logs
// each wake and reports it delivered, so a newcomer sees alarms fire.
type LogWaker struct{ Logger *slog.Logger }

// Wake logs the wake.
func (l LogWaker) Wake(ctx context.Context, w Wake) error {
	payload := w.Payload
	if len(payload) == 0 {
		payload = json.RawMessage("{}")
	}
	l.Logger.InfoContext(ctx, "alarm wake (log waker: set WAKE_URL to deliver it)",
		"alarm_id", w.AlarmID, "owner_did", w.OwnerDID, "label", w.Label, "conversation_id", w.ConversationID,
		"wake_message", w.WakeMessage, "payload", string(payload), "scheduled_for", w.ScheduledFor,
		"idempotency_key", w.IdempotencyKey)
	return nil
}

// WakeSignatureHeader carries a wake's signature: "t=<unix seconds>,
// v1=<hex HMAC-SHA256 of "<t>.<body>" keyed with WAKE_SECRET>".
const WakeSignatureHeader = "Chronos-Signature"

// WakeSignatureTolerance is how old a signature's timestamp a receiver
// should accept (VerifyWakeSignature does): an older one is a replay.
const WakeSignatureTolerance = 5 * time.Minute

// WakeSecretMinLen is the shortest WAKE_SECRET accepted, in bytes.
const WakeSecretMinLen = 32

// SignWake returns the WakeSignatureHeader value of body signed at t.
func SignWake(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(wakeMAC(secret, ts, body))
}

func wakeMAC(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return m.Sum(nil)
}

// VerifyWakeSignature checks a WakeSignatureHeader value for body, as a
// receiver written in Go can: the HMAC must match (any of several v1
// values, as during a secret's rotation) and its timestamp be within
// WakeSignatureTolerance of now, either way.
func VerifyWakeSignature(secret []byte, header string, body []byte, now time.Time) error {
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			if sig, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, sig)
			}
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return errors.New("wake signature: want t=<unix seconds>,v1=<hex>")
	}
	if age := now.Sub(time.Unix(sec, 0)); age > WakeSignatureTolerance || age < -WakeSignatureTolerance {
		return fmt.Errorf("wake signature: timestamp %s is %s from now, more than %s: a replay, or a clock off",
			time.Unix(sec, 0).UTC().Format(time.RFC3339), age.Round(time.Second), WakeSignatureTolerance)
	}
	want := wakeMAC(secret, ts, body)
	for _, sig := range sigs {
		if hmac.Equal(sig, want) {
			return nil
		}
	}
	return errors.New("wake signature: no v1 signature matches the body (wrong WAKE_SECRET, or the body changed)")
}

// HTTPWaker POSTs each wake's Body to URL (WAKE_URL) with an
// Idempotency-Key header (the run's key) and a WakeSignatureHeader signed
// with Secret (WAKE_SECRET). A 2xx answer is a delivered wake. As for the
// HTTP executor, 408, 429 and 5xx answers and transport errors are
// retried with backoff, or after their Retry-After if that is longer (up
// to 5 minutes); redirects are not followed and fail the wake, as other
// 4xx answers do at once. 409 is retried: a receiver that deduplicates
// on the key answers it while the first delivery is in progress, and
// should answer 2xx to a key it has delivered.
type HTTPWaker struct {
	URL    string
	Secret []byte
	Client *http.Client
	// Now is the signature's clock: receivers compare its timestamp with
	// their own wall clock. Default time.Now.
	Now func() time.Time
}

// NewHTTPWaker returns an HTTPWaker whose calls time out after timeout
// and that keeps up to maxConns connections to url open.
func NewHTTPWaker(url string, secret []byte, timeout time.Duration, maxConns int) *HTTPWaker {
	return &HTTPWaker{URL: url, Secret: secret, Client: newPostClient(timeout, maxConns)}
}

// Wake delivers w.
func (h *HTTPWaker) Wake(ctx context.Context, w Wake) error {
	body, err := w.Body()
	if err != nil {
		return &PermanentError{err}
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return &PermanentError{fmt.Errorf("WAKE_URL %q: %w", h.URL, err)}
	}
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Idempotency-Key", w.IdempotencyKey)
	hr.Header.Set(WakeSignatureHeader, SignWake(h.Secret, now(), body))
	resp, err := h.Client.Do(hr)
	if err != nil {
		return fmt.Errorf("deliver wake: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	// A receiver deduplicating on the key answers 409 while the first
	// delivery is in progress: retried, not permanent.
	return answerError("wake receiver", "WAKE_URL", resp, b, http.StatusConflict)
}
