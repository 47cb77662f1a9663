package queue

// StatusFieldsProbe is a script on alarm_lifecycle.lua's status_fields,
// for status_fields_test.go: KEYS[1] is a schedule hash whose target is
// a workflow's. It makes h with the target only, as status.lua makes it,
// asks alarm_of whether it is an alarm, then reads next and paused
// through h, writes next and reads it through h again. Output: {alarm_of
// answered nil, h holds no kind after alarm_of, next, paused, next again}.
var StatusFieldsProbe = joinScript([]byte(`
local h = setmetatable({KEYS[1], [sfTarget] = redis.call('HGET', KEYS[1], sfTarget)}, status_fields)
local a = alarm_of(KEYS[1], h)
local kind = rawget(h, sfKind)
local nxt = h[sfNext]
local paused = h[sfPaused]
redis.call('HSET', KEYS[1], sfNext, 'changed')
return {tostring(a == nil), tostring(kind == nil), nxt, tostring(paused), h[sfNext]}
`), mustReadLib("alarm_lifecycle"))

func mustReadLib(name string) []byte {
	b, err := luaFiles.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(err)
	}
	return b
}
