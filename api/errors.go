package api

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
)

// Error codes of the {"error": {"code": ...}} body.
const (
	CodeInvalidArgument  = "invalid_argument"
	CodeNotFound         = "not_found"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeConflict         = "conflict"
	CodePayloadTooLarge  = "payload_too_large"
	CodeRequestTimeout   = "request_timeout"
	CodeUnavailable      = "unavailable"
	CodeRedisFull        = "redis_full"
	CodeQuotaExceeded    = "quota_exceeded"
	CodeKeyReused        = "idempotency_key_reused"
	CodeUnsupportedMedia = "unsupported_media_type"
	CodeInternal         = "internal"
)

// ErrorBody is the body of every error response.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is a machine-readable code and a message for people. A 400
// message starts with the field at fault ("timezone: ...").
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Details lists each field at fault when a request has several, in
	// the order of Message's "; "-separated parts.
	Details []FieldDetail `json:"details,omitempty"`
}

// FieldDetail is one field at fault and why.
type FieldDetail struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// fieldDetails lists the fields of a request with several faults; nil for
// any other error.
func fieldDetails(err error) []FieldDetail {
	var all model.FieldErrors
	if !errors.As(err, &all) {
		return nil
	}
	out := make([]FieldDetail, len(all))
	for i, e := range all {
		out[i] = FieldDetail{Field: model.ErrorField(e), Message: e.Error()}
	}
	return out
}

// statusError is an error with its own status, code and public message.
type statusError struct {
	status  int
	code    string
	message string
	cause   error // logged, never shown
}

func (e *statusError) Error() string {
	if e.cause != nil {
		return e.message + ": " + e.cause.Error()
	}
	return e.message
}

func (e *statusError) Unwrap() error { return e.cause }

// fieldError is a 400 naming a request field.
func fieldError(field, format string, args ...any) error {
	return &model.FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// classify maps an error to its status, code and public message.
func classify(err error) (int, string, string) {
	var (
		all model.FieldErrors
		uf  *model.UnknownFieldError
		fe  *model.FieldError
		se  *statusError
		mbe *http.MaxBytesError
		he  *echo.HTTPError
	)
	switch {
	case errors.As(err, &all):
		return http.StatusBadRequest, CodeInvalidArgument, all.Error()
	case errors.As(err, &uf):
		return http.StatusBadRequest, CodeInvalidArgument, uf.Error()
	case errors.As(err, &fe):
		return http.StatusBadRequest, CodeInvalidArgument, fe.Error()
	case errors.As(err, &se):
		return se.status, se.code, se.message
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, CodePayloadTooLarge,
			fmt.Sprintf("body: larger than %d bytes", mbe.Limit)
	case queue.IsFull(err):
		return http.StatusInsufficientStorage, CodeRedisFull, msgRedisFull
	case queue.IsUnavailable(err):
		return http.StatusServiceUnavailable, CodeUnavailable, msgRedisUnavailable
	case errors.Is(err, queue.ErrTooLarge):
		return http.StatusRequestEntityTooLarge, CodePayloadTooLarge, err.Error()
	case errors.Is(err, queue.ErrQuota):
		return http.StatusInsufficientStorage, CodeQuotaExceeded, err.Error()
	case errors.Is(err, queue.ErrNotFound):
		return http.StatusNotFound, CodeNotFound, err.Error()
	case errors.Is(err, queue.ErrConflict):
		return http.StatusConflict, CodeConflict, err.Error()
	case errors.As(err, &he):
		// echo's own: unknown route, wrong method, and the like.
		msg := http.StatusText(he.Code)
		if m, ok := he.Message.(string); ok && m != "" {
			msg = m
		}
		return he.Code, codeFor(he.Code), strings.ToLower(msg)
	}
	return http.StatusInternalServerError, CodeInternal, "internal error"
}

// The messages of a sick Redis.
const (
	msgRedisFull = "Redis is full (maxmemory reached, policy noeviction): it refuses writes until memory is freed " +
		"or maxmemory raised; nothing was written"
	msgRedisUnavailable = "Redis is unavailable (not reachable or not answering in time); retry later"
)

// RetryAfterSeconds is the Retry-After of a 503 or a 507: Redis
// unavailable, stopping or full.
const RetryAfterSeconds = 5

// codeFor names the code of a status echo produced.
func codeFor(status int) string {
	switch status {
	case http.StatusBadRequest:
		return CodeInvalidArgument
	case http.StatusNotFound:
		return CodeNotFound
	case http.StatusMethodNotAllowed:
		return CodeMethodNotAllowed
	case http.StatusConflict:
		return CodeConflict
	case http.StatusRequestEntityTooLarge:
		return CodePayloadTooLarge
	case http.StatusServiceUnavailable:
		return CodeUnavailable
	}
	if status >= 500 {
		return CodeInternal
	}
	return strings.ReplaceAll(strings.ToLower(http.StatusText(status)), " ", "_")
}

// handleError is the echo HTTPErrorHandler: the one place errors become
// responses.
func (s *server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status, code, msg := classify(err)
	if status == http.StatusServiceUnavailable || status == http.StatusInsufficientStorage {
		c.Response().Header().Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
	}
	if status >= 500 {
		req := c.Request()
		s.log.ErrorContext(req.Context(), "http request failed",
			slog.String("method", req.Method), slog.String("path", req.URL.Path),
			slog.Int("status", status), slog.String("reason", msg), slog.String("error", err.Error()))
	}
	if err := c.JSON(status, ErrorBody{ErrorDetail{Code: code, Message: msg, Details: fieldDetails(err)}}); err != nil {
		s.log.WarnContext(c.Request().Context(), "write error response", slog.String("error", err.Error()))
	}
}
