package queue

import (
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"io/fs"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/stretchr/testify/require"
)

// TestKeySpelling pins every key the store writes: renaming one strands
// the data of every running deployment.
func TestKeySpelling(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ got, want string }{
		{shardPrefix(7), "chronos:{s07}:"},
		{shardPrefix(123), "chronos:{s123}:"},
		{dueKey(7), "chronos:{s07}:due"},
		{inflightKey(7), "chronos:{s07}:inflight"},
		{versionsKey(7), "chronos:{s07}:vers"},
		{leaseKey(7), "chronos:{s07}:lease"},
		{scheduleKey(7, "a"), "chronos:{s07}:sched:a"},
		{historyKey(7, "a"), "chronos:{s07}:runs:a"},
		{deletedKey(7, "a"), "chronos:{s07}:deleted:a"},
		{runKey(7, "k"), "chronos:{s07}:run:k"},
		{alarmsKey(7, "did:matrix:u:f"), "chronos:{s07}:alarms:did:matrix:u:f"},
		{alarmKeysKey(7, "did:matrix:u:f"), "chronos:{s07}:alarmkeys:did:matrix:u:f"},
		{alarmsActiveKey(7, "did:matrix:u:f"), "chronos:{s07}:alarmsactive:did:matrix:u:f"},
		{releasedChannel(7), "chronos:{s07}:released"},
		{manualKeyPrefix(7) + "k", "chronos:{s07}:manual:k"},
		{ShardQueue("chronos", 7), "s07}chronos"},
		{workflowKey("wf", "2"), "chronos:wf:{wf}:2"},
		{workflowsKey, "chronos:workflows"},
		{requestKey("scope", "k"), "chronos:req:" + requestDigest("scope", "k")},
		{metaKey, "chronos:meta"},
		{schedulersKey, "chronos:{schedulers}"},
		{schedulersHeldKey, "chronos:{schedulers}:held"},
		{launchersKey, "chronos:{launchers}"},
		{launchersSkewKey, "chronos:{launchers}:skew"},
	} {
		require.Equal(t, tc.want, tc.got)
	}
}

// TestFieldSpelling pins every hash field: as with keys, a renamed field
// strands stored data.
func TestFieldSpelling(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ got, want string }{
		{sfOwner, "o"}, {sfKind, "k"}, {sfTarget, "t"}, {sfWorkflow, "w"}, {sfVersion, "v"},
		{sfUser, "u"}, {sfCron, "c"}, {sfDialect, "d"}, {sfZone, "z"}, {sfEvery, "e"},
		{sfFireAt, "f"}, {sfDelay, "ds"}, {sfStartAt, "s"}, {sfEndAt, "x"}, {sfJitter, "j"}, {sfOverlap, "op"},
		{sfCatchup, "cp"}, {sfAnchor, "a"}, {sfCreated, "cr"}, {sfUpdated, "up"},
		{sfTiming, "tk"}, {sfVer, "ver"}, {sfNext, "next"}, {sfPaused, "paused"},
		{sfInflight, "inflight"}, {sfHeld, "held"}, {sfReleased, "rel"}, {sfResumed, "rs"},
		{rfSchedule, "sid"}, {rfRunAt, "at"}, {rfFireAt, "fire"}, {rfStatus, "st"}, {rfRunID, "rid"},
		{rfEnqueued, "enq"}, {rfCreated, "cr"}, {rfUpdated, "up"}, {rfError, "err"}, {rfSource, "src"},
		{rfAttempts, "att"}, {rfRetryAt, "retry"}, {rfLastErr, "lerr"}, {rfRequest, "req"}, {rfReason, "rsn"},
		{qfBody, "body"}, {qfStatus, "status"}, {qfResponse, "resp"},
		{metaShards, "shards"},
		{segSched, "sched:"}, {segRuns, "runs:"}, {segRun, "run:"}, {segDeleted, "deleted:"},
		{stEnqueued, "ENQUEUED"}, {stStarted, "STARTED"}, {stSuccess, "SUCCESS"}, {stFailed, "FAILED"},
		{stSkipped, "SKIPPED"}, {srcSchedule, "schedule"}, {srcManual, "manual"}, {overlapQueue, "queue"},
		{flagSet, "1"},
	} {
		require.Equal(t, tc.want, tc.got)
	}
	// Definition fields and state fields of a schedule hash never share a
	// name: appendDefString and encodeDef read only the definition.
	seen := map[string]bool{}
	for _, f := range defFields {
		require.False(t, seen[f], "definition field %q listed twice", f)
		seen[f] = true
	}
	for _, f := range []string{sfTiming, sfVer, sfNext, sfPaused, sfInflight, sfHeld, sfReleased, sfResumed} {
		require.False(t, seen[f], "state field %q is also a definition field", f)
	}
}

// schemaConsts parses schema.go and returns its constants' names and
// values (strings and integers, as Lua sees them).
func schemaConsts(t *testing.T) map[string]any {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "schema.go", nil, 0)
	require.NoError(t, err)
	byName := map[string]any{}
	for _, n := range luaNames {
		byName[n.name] = n.value
	}
	out := map[string]any{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			for _, name := range spec.(*ast.ValueSpec).Names {
				// The value as compiled, taken from luaNames when it is
				// listed there; an unlisted constant is reported below.
				out[name.Name] = byName[name.Name]
			}
		}
	}
	return out
}

// TestLuaPreludeNamesEveryConstant holds schema.go's constants and the
// Lua prelude together: each constant is declared in Lua under its Go
// name, and the prelude declares nothing else.
func TestLuaPreludeNamesEveryConstant(t *testing.T) {
	t.Parallel()
	consts := schemaConsts(t)
	listed := map[string]bool{}
	for _, n := range luaNames {
		require.Contains(t, consts, n.name, "luaNames lists %s, which schema.go does not declare", n.name)
		require.False(t, listed[n.name], "luaNames lists %s twice", n.name)
		listed[n.name] = true
		switch v := n.value.(type) {
		case string:
			require.NotContains(t, v, "'", "%s cannot be quoted in Lua", n.name)
			require.Contains(t, luaPrelude, "local "+n.name+" = '"+v+"'\n")
		case int:
			require.Contains(t, luaPrelude, "local "+n.name+" = "+constant.MakeInt64(int64(v)).String()+"\n")
		default:
			t.Fatalf("%s has type %T", n.name, v)
		}
	}
	for name := range consts {
		require.True(t, listed[name], "schema.go declares %s but luaNames does not list it: Lua cannot use it", name)
	}
}

// storeScripts are the names of every script in lua/: all the store's
// (asynq's own scripts are package asynqwire's).
func storeScripts(t *testing.T) []string {
	t.Helper()
	files, err := fs.Glob(luaFiles, "lua/*.lua")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(strings.TrimPrefix(f, "lua/"), ".lua"))
	}
	return names
}

// luaCode returns a script's code without its comments.
func luaCode(t *testing.T, name string) string {
	t.Helper()
	b, err := fs.ReadFile(luaFiles, "lua/"+name+".lua")
	require.NoError(t, err)
	var code []string
	for _, line := range strings.Split(string(b), "\n") {
		if i := strings.Index(line, "--"); i >= 0 {
			line = line[:i]
		}
		code = append(code, line)
	}
	return strings.Join(code, "\n")
}

// TestScriptsSpellNoField: the store's scripts name fields, key segments,
// stored values and their answers through the prelude, never as
// literals, and use no name the prelude does not declare (a misspelt one
// would fail only when its line runs).
func TestScriptsSpellNoField(t *testing.T) {
	t.Parallel()
	spelt := map[string]string{}
	declared := map[string]bool{}
	for _, n := range luaNames {
		declared[n.name] = true
		// Fields, key segments and stored values; "1", "0", "+" and "-"
		// (flagSet and commit.lua's marks) are too common to tell apart.
		if v, ok := n.value.(string); ok && len(v) > 1 {
			spelt[v] = n.name
		}
	}
	literal := regexp.MustCompile(`'([^']*)'|"([^"]*)"`)
	answer := regexp.MustCompile(`return\s*\{?\s*-?\d|out\[#out \+ 1\] = -?\d`)
	// Names the prelude could declare: a lowercase prefix of one of its
	// names (sf, rf, commit, ...) then a capital.
	prefixes := map[string]bool{}
	for _, n := range luaNames {
		if p := strings.IndexFunc(n.name, unicode.IsUpper); p > 0 {
			prefixes[n.name[:p]] = true
		}
	}
	alts := make([]string, 0, len(prefixes))
	for p := range prefixes {
		alts = append(alts, p)
	}
	ident := regexp.MustCompile(`\b(?:` + strings.Join(alts, "|") + `)[A-Z]\w*`)
	for _, name := range storeScripts(t) {
		code := luaCode(t, name)
		for _, m := range literal.FindAllStringSubmatch(code, -1) {
			v := m[1] + m[2]
			if n, ok := spelt[v]; ok {
				t.Errorf("lua/%s.lua spells %q: use %s", name, v, n)
			}
		}
		for _, m := range answer.FindAllString(code, -1) {
			t.Errorf("lua/%s.lua answers %q: name the code in schema.go", name, m)
		}
		for _, id := range ident.FindAllString(code, -1) {
			if !declared[id] {
				t.Errorf("lua/%s.lua uses %s, which the prelude does not declare", name, id)
			}
		}
	}
}

func TestJoinScriptKeepsShebangFirst(t *testing.T) {
	t.Parallel()
	src := joinScript([]byte("#!lua flags=no-writes\nreturn 1\n"), []byte("local function lib() end"))
	first, rest, _ := strings.Cut(src, "\n")
	require.Equal(t, "#!lua flags=no-writes", first)
	require.True(t, strings.HasPrefix(rest, preludeHeader), "the prelude follows the shebang")
	require.Less(t, strings.Index(src, "local function lib"), strings.Index(src, "return 1"), "libraries come before the script")

	src = joinScript([]byte("return 1\n"))
	require.True(t, strings.HasPrefix(src, preludeHeader), "without a shebang the prelude comes first")
}

// A script's prelude declares the names of schema.go it and its
// libraries use, and no other: Lua bounds a function's locals.
func TestJoinScriptDeclaresTheNamesUsed(t *testing.T) {
	t.Parallel()
	src := joinScript([]byte("return stEnqueued\n"), []byte("local function lib() return sfNext end"))
	require.Contains(t, src, "local stEnqueued = '"+stEnqueued+"'\n")
	require.Contains(t, src, "local sfNext = '"+sfNext+"'\n")
	require.NotContains(t, src, "local stFailed =")
	require.Less(t, strings.Count(src, "\nlocal "), 4)
}

// TestScriptsReadNoClock: now is an argument of every script (STYLE rule
// 3), never Redis's TIME, so a test's clock and the replicas' shared one
// are the only clocks.
func TestScriptsReadNoClock(t *testing.T) {
	t.Parallel()
	files, err := fs.Glob(luaFiles, "lua/*.lua")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		code := luaCode(t, strings.TrimSuffix(strings.TrimPrefix(f, "lua/"), ".lua"))
		require.NotRegexp(t, `(?i)['"]TIME['"]`, code, "%s reads Redis's clock", f)
	}
}

func TestRecordTTL(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	require.Equal(t, int64(7*86400), recordTTL(7*day, now.Add(-time.Hour), now), "a run due already keeps the retention")
	require.Equal(t, int64(7*86400+3600), recordTTL(7*day, now.Add(time.Hour), now), "a run ahead keeps it past its time")
	far := time.Date(2400, 1, 1, 0, 0, 0, 0, time.UTC)
	require.Equal(t, int64(maxRecordTTL/time.Second), recordTTL(7*day, far, now), "centuries ahead: capped")
}
