package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/chronos-sched/chronos/api/auth"
	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
)

// HeaderIdempotencyKey makes a creating POST safe to retry: the same key
// and body within queue.RequestTTL (24 h) get the first answer again.
const HeaderIdempotencyKey = "Idempotency-Key"

// HeaderReplayed marks an answer repeated for a retried request.
const HeaderReplayed = "Idempotent-Replayed"

// idempotent answers a request that carries an Idempotency-Key header at
// most once: a retry with the same key and body gets the first answer,
// the same key with another body is a 422. Without the header a request
// is handled as usual. Keys are per route and per caller (the token's
// subject), so two clients never see each other's answers. Only a 2xx is
// kept: a request refused for bad input or a sick Redis can be retried.
func (s *server) idempotent(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		key := c.Request().Header.Get(HeaderIdempotencyKey)
		if key == "" {
			return next(c)
		}
		if err := model.ValidateID(HeaderIdempotencyKey, key); err != nil {
			return err
		}
		body, err := s.readBody(c)
		if err != nil {
			return err
		}
		c.Request().Body = io.NopCloser(bytes.NewReader(body))
		digest := bodyDigest(body)
		caller, _ := auth.FromContext(c.Request().Context())
		scope := c.Request().Method + " " + c.Path() + "\x00" + caller.Subject

		ctx := c.Request().Context()
		claim, err := s.store.ClaimRequest(ctx, scope, key, digest)
		if err != nil {
			return err
		}
		switch claim.State {
		case queue.RequestAnswered:
			c.Response().Header().Set(HeaderReplayed, "true")
			return c.JSONBlob(claim.Status, claim.Response)
		case queue.RequestInProgress:
			return &statusError{status: http.StatusConflict, code: CodeConflict,
				message: HeaderIdempotencyKey + ": a request with this key is still being answered; retry in a few seconds"}
		case queue.RequestMismatch:
			return &statusError{status: http.StatusUnprocessableEntity, code: CodeKeyReused,
				message: HeaderIdempotencyKey + ": this key was used with another body in the last 24 hours; use a new key for a new request"}
		}

		rec := &responseCopy{ResponseWriter: c.Response().Writer}
		c.Response().Writer = rec
		herr := next(c)
		status := c.Response().Status
		if herr != nil || status < 200 || status > 299 {
			status, rec.body = 0, bytes.Buffer{}
		}
		// Recorded even if the client has gone: its retry wants the answer.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := s.store.AnswerRequest(actx, scope, key, digest, status, rec.body.Bytes()); err != nil {
			s.log.WarnContext(ctx, "idempotency key answer not recorded: a retry within a minute gets a 409",
				slog.String("error", err.Error()))
		}
		return herr
	}
}

// bodyDigest hashes a JSON body with its insignificant whitespace
// removed, so a retry that re-indents the same body is the same request.
func bodyDigest(body []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, body) != nil {
		b.Reset()
		b.Write(body)
	}
	h := sha256.Sum256(b.Bytes())
	return hex.EncodeToString(h[:])
}

// responseCopy keeps a copy of the response body it writes.
type responseCopy struct {
	http.ResponseWriter
	body bytes.Buffer
}

func (r *responseCopy) Write(b []byte) (int, error) {
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection beneath.
func (r *responseCopy) Unwrap() http.ResponseWriter { return r.ResponseWriter }
