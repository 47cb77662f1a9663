// Package auth verifies and mints the signed JWTs that guard chronos's
// HTTP API, and turns a verified token into an Identity.
//
// A token is signed with HS256 (a shared secret, AUTH_JWT_SECRET) or with
// an asymmetric key (EdDSA with Ed25519, or RS256), verified with the
// public key (AUTH_JWT_PUBLIC_KEY). Every token must carry an expiry
// (exp); the issuer (iss) and audience (aud) are checked when configured.
//
// The claims chronos reads are sub, the caller, and scope, what it may do:
// a space-separated string in the OAuth style ("schedules:read
// schedules:write") or a JSON list of strings. The scopes are
//
//	schedules:read   read schedules, runs, previews, the OpenAPI document
//	schedules:write  upsert and pause schedules
//	runs:write       report a run's status (executors)
//	admin            everything: the workflow store, manual runs,
//	                 deletes, /metrics, pprof, a writable dashboard
//
// An agent's sub is its DID, did:matrix:<user_id>:<keyfp>; Identity.Owner
// parses it (ParseDID), for the owner-scoped routes of agent alarms.
//
// Verification never touches Redis: a request with a missing, expired,
// badly or foreign-signed token is refused before any handler runs.
package auth
