// Package api is chronos's HTTP API: echo handlers that validate requests,
// call the schedule store (package queue) and shape its answers as JSON.
//
// [New] builds the *echo.Echo; cmd mounts it (and /metrics, /monitoring)
// on HTTP_ADDR. Handlers never write anything before a request has been
// validated in full, so a rejected request leaves Redis untouched.
//
// # Errors
//
// Every handler returns its error to one echo HTTPErrorHandler, which maps
// it once:
//
//	*model.FieldError, malformed JSON, bad query   400 invalid_argument
//	queue.ErrNotFound, unknown route               404 not_found
//	wrong method on a known route                  405 method_not_allowed
//	queue.ErrConflict                              409 conflict
//	body over Config.BodyLimit                     413 payload_too_large
//	body not declared Content-Type application/json 415 unsupported_media_type
//	no token, or expired, malformed, foreign-signed 401 unauthenticated, WWW-Authenticate
//	a token without the route's scope              403 permission_denied
//	a client over its rate (Config.RateLimit)      429 rate_limited, Retry-After
//	Redis unreachable or not answering in time     503 unavailable, Retry-After
//	Redis full (maxmemory reached, noeviction)     507 redis_full, Retry-After
//	workflow DAG over its size quota               413 payload_too_large
//	workflow versions quota reached                507 quota_exceeded
//	anything else (logged, message hidden)         500 internal
//
// and answers {"error": {"code": "...", "message": "..."}}.
//
// # Access
//
// Config chooses access explicitly: Auth, a token verifier (package
// auth), or Open. With Auth, every route but GET /healthz and GET /readyz
// needs Authorization: Bearer <JWT>, checked before any handler runs and
// so before anything reads Redis; each route needs a scope (access.go):
// schedules:read for reads and previews, schedules:write for upsert and
// pause, runs:write for run status reports, admin for deletes, manual
// runs, the workflow store, /metrics and pprof (and any route not listed,
// so a new route is closed until classified). admin implies every scope.
// The verified auth.Identity is in the request's context
// (auth.FromContext). The asynqmon dashboard under MonitoringPath takes
// the token from a login form into an HttpOnly, SameSite=Strict cookie;
// GET needs schedules:read, anything else admin. Each client (a token's
// subject, or before authentication its IP address) has a token bucket
// of Config.RateLimit requests per second. A 400 message
// starts with the field at fault: "cron_expr: invalid cron expression ...",
// "timezone: unknown time zone \"Mars/Base\"". An unknown field of a
// request object is a 400 naming it (and the field meant, when one is
// close), as is a known field of the wrong type; a workflow DAG is kept
// as sent.
//
// The alarms' routes (/v1/alarms, docs/alarms.md) are an agent's own:
// they need no scope but always a verified token whose subject is a DID,
// the owner, even on an Open API, where Config.OwnerAuth verifies them
// (chronos dev makes its secret); anything else is a 401 before Redis is
// read. Another owner's alarm is a 404, as a missing one.
//
// Every endpoint that reads a body (POST and PUT) requires Content-Type
// application/json (parameters such as charset allowed): a web page can
// make a browser send text/plain, form and multipart bodies to any
// address without a CORS preflight, never JSON, so this is what keeps a
// page inside the network from writing through a browser.
//
// A full Redis (used memory over maxmemory under the noeviction policy)
// refuses every write whole: Redis 7 refuses a script that declares flags
// before it runs (package queue), so no request writes half its work.
// Writes answer 507 "Redis is full ..." and GET /readyz answers 503 with
// code redis_full; reads go on. On Redis before 7 (and miniredis, which
// has no maxmemory) scripts run without flags, and a script may write
// past maxmemory after its first write.
//
// Requests net/http refuses before any handler runs (a malformed request
// line, a bad percent escape in the path, headers over 1 MiB) get its
// own plain-text answers, "400 Bad Request" and "431 Request Header
// Fields Too Large", not the JSON body above: net/http offers no hook to
// shape them. A bad escape in the query is the API's 400 naming the
// parameter.
//
// A request that declares a body and leaves it unread (a GET, a 404, an
// early 400) is answered and its connection closed, rather than held
// while net/http waits for the body; reading a body is bounded by
// Config.BodyReadTimeout. ConnLimiter caps the connections a server
// holds open (cmd's MAX_CONNS).
//
// Identifiers (ids in bodies and paths) must be valid UTF-8 with no
// whitespace, control or invisible format characters (bidi overrides,
// zero-width characters); user_id and run_id may hold spaces but no
// control or format characters (model.ValidateID, model.ValidateText).
// Invalid UTF-8 in any JSON string is a 400, never rewritten.
//
// # Endpoints
//
//	GET    /healthz                            200 {"status":"ok"}
//	GET    /readyz                             200 {"status":"ok"} | 503
//	GET    /v1/preview                         200 {"fire_times","explain","times","skipped"} | 400
//	POST   /schedules/upsert                   200 {"schedule_id","next_run_at","created","changed","state"} | 400
//	POST   /schedules/pause                    200 schedule | 400 | 404 | 409
//	GET    /schedules                          200 {"schedules":[...],"next_cursor"} | 400
//	GET    /schedules/:id                      200 schedule + preview (+ preview_times, preview_skipped) + explain + recent_runs | 400 | 404
//	DELETE /schedules/:id                      204 | 400 | 404
//	GET    /schedules/:id/runs                 200 {"runs":[...]} | 400 | 404
//	GET    /runs/:idempotency_key              200 run | 400 | 404
//	POST   /runs/:idempotency_key/status       200 run | 400 | 404 | 409
//	POST   /run-launcher/start                 200 {"started","run"} | 400 | 409
//	PUT    /workflows/:id/versions/:version    200 {"workflow_id","version"} | 400
//	GET    /workflows/:id/versions/:version    200 the DAG as stored | 400 | 404
//	DELETE /workflows/:id/versions/:version    204 | 400 | 404
//	POST   /v1/alarms                          201 alarm + "deduped":false | 200 the key's alarm, "deduped":true | 400 | 401 | 413
//	GET    /v1/alarms                          200 {"alarms":[...]} newest first | 400 | 401
//	GET    /v1/alarms/:id                      200 alarm | 400 | 401 | 404
//	DELETE /v1/alarms/:id                      200 alarm, cancelled or as it was | 400 | 401 | 404
//	GET    /openapi.json                       200 the OpenAPI 3 document
//
// The OpenAPI document (openapi.json in this folder, embedded) describes
// each request and response field.
//
// Upsert takes a kind: cron (the default) with cron_expr, once with
// delay_seconds or fire_at, every with every_seconds; a timing field of
// another kind is a 400 naming it (kinds.go). A once schedule's
// delay_seconds counts from the store's clock when the schedule is created;
// an upsert that repeats the stored delay_seconds or fire_at keeps the fire
// time, so a repeated body never moves it nor fires it again after its run.
// A once schedule that names no catchup_policy gets "latest".
//
// Upsert answers 200 whether it created the schedule or not; "created"
// says which, and "changed" whether anything was written (an upsert of the
// stored body changes nothing, not even updated_at). Without a
// schedule_id, upsert generates one ("sch_" + 32 hex digits), so only
// requests that name their schedule are idempotent.
//
// A schedule's "state" is paused when paused, completed when it has no
// next fire time, and active otherwise; its "next_run_at" is null unless
// active. GET /schedules/:id adds "preview", the next five fire times after
// now ([] unless active), "explain", its timing in words, and
// "recent_runs", newest first.
//
// GET /schedules pages in no particular order; following next_cursor
// until it is "" visits every schedule present for the whole walk once;
// a page holds at most limit schedules.
//
// A manual run (POST /run-launcher/start) without an idempotency_key gets
// model.ManualRunKey(workflow_id, version, scheduled_for), so repeating a trigger for the same workflow version and time starts one
// run; the repeat answers started false with the existing run.
// A caller-chosen idempotency_key must not be 64 lowercase hex digits,
// the form of the keys chronos derives (model.ValidateManualKey), except
// the very key it would derive for that workflow, version and time: a
// schedule's keys are predictable, and a manual run under one would take
// over that scheduled run (recorded under the caller's workflow and user,
// the planned run recorded SKIPPED).
//
// # Observability
//
// Each request is logged once through the injected slog.Logger ("http
// request" with method, path, route, status, duration_ms) and counted in
// chronos_http_requests_total{method,route,code} and
// chronos_http_request_duration_seconds{method,route}, where route is the
// registered pattern (e.g. /schedules/:id, also for routes the caller adds
// after New) or "unmatched", and method is OTHER for non-standard methods.
package api
