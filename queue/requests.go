package queue

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// RequestTTL is how long the first answer to a request sent with an
// Idempotency-Key header is kept: a retry within it gets that answer.
const RequestTTL = 24 * time.Hour

// requestClaimTTL bounds a claim not answered yet: a process that died
// while answering frees the key after it.
const requestClaimTTL = time.Minute

// RequestState is what a claim of an Idempotency-Key found.
type RequestState int

const (
	// RequestClaimed: this request is the first with its key; answer it,
	// then call AnswerRequest.
	RequestClaimed RequestState = iota
	// RequestAnswered: the first request with this key and body was
	// answered; Status and Response hold its answer.
	RequestAnswered
	// RequestInProgress: the first request with this key and body is
	// still being answered.
	RequestInProgress
	// RequestMismatch: the key was used with another body.
	RequestMismatch
)

// RequestClaim is the outcome of ClaimRequest.
type RequestClaim struct {
	State    RequestState
	Status   int
	Response []byte
}

// ClaimRequest claims key in scope (a route and a caller) for a request
// whose body has bodyDigest, or returns the first request's answer. One
// script decides, so concurrent requests with one key never both run.
func (s *Store) ClaimRequest(ctx context.Context, scope, key, bodyDigest string) (RequestClaim, error) {
	vals, err := requestClaimScript.Run(ctx, s.rdb, []string{requestKey(scope, key)},
		bodyDigest, requestClaimTTL.Milliseconds()).StringSlice()
	if err != nil {
		return RequestClaim{}, fmt.Errorf("claim idempotency key: %w", err)
	}
	if len(vals) == 0 {
		return RequestClaim{State: RequestClaimed}, nil
	}
	h := make(map[string]string, len(vals)/2)
	for i := 0; i+1 < len(vals); i += 2 {
		h[vals[i]] = vals[i+1]
	}
	switch st, answered := h[qfStatus]; {
	case h[qfBody] != bodyDigest:
		return RequestClaim{State: RequestMismatch}, nil
	case !answered:
		return RequestClaim{State: RequestInProgress}, nil
	default:
		code, err := strconv.Atoi(st)
		if err != nil {
			return RequestClaim{}, fmt.Errorf("idempotency key: stored status %q: %w", st, err)
		}
		return RequestClaim{State: RequestAnswered, Status: code, Response: []byte(h[qfResponse])}, nil
	}
}

// AnswerRequest records the answer of a request that claimed its key, for
// RequestTTL. A status of 0 gives the claim up instead, so a retry runs
// the request again: an error is not an answer worth repeating.
func (s *Store) AnswerRequest(ctx context.Context, scope, key, bodyDigest string, status int, response []byte) error {
	st := ""
	if status != 0 {
		st = strconv.Itoa(status)
	}
	err := requestAnswerScript.Run(ctx, s.rdb, []string{requestKey(scope, key)},
		bodyDigest, st, response, RequestTTL.Milliseconds()).Err()
	if err != nil {
		return fmt.Errorf("record the answer of idempotency key: %w", err)
	}
	return nil
}
