// Package crontool is the agent's cron tool on chronos's alarms: the tool
// of nanobot (../../../shared/specs/nanobot-cron.md), with its actions
// add, list and remove, its kinds every, cron and at, and its texts, for
// a model to call over HTTP (api's /v1/tools/cron) or MCP.
//
// A job is an alarm of its owner (ToAlarm, FromAlarm): the job id is the
// alarm's idempotency key, the name its label, the message its wake
// message, and deliver, channel, to and the job id travel in its payload,
// so every wake carries them to the agent's gateway. A disabled job is a
// paused alarm, a removed one a cancelled alarm, and an at job that ran a
// fired one, which the tool's list leaves out.
//
// Tool.Call answers every mistake of a model as a Result with IsError
// and a text the model reads (nanobot's own texts where nanobot has
// them); its error is kept for failures of the server. Definition is the
// tool's JSON Schema for function calling, and NewMCPServer serves it as
// the MCP tools cron_add, cron_list and cron_remove. Import and Export
// move an owner's jobs in and out of a nanobot jobs.json (package
// nanobot), idempotently.
//
// docs/cron-tool.md has the rules, one a bullet.
package crontool
