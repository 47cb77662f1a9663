package api

import (
	"encoding/json"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/chronos-sched/chronos/model"
)

// dstPolicyMembers are the members of a body's dst_policy object.
var dstPolicyMembers = []string{"spring_forward", "fall_back"}

// dstPolicy reads the dst_policy object of a body, such as
// {"spring_forward": "shift", "fall_back": "first"}; either member may be
// left out (or null) for its default, and an absent or null dst_policy is
// the default policy. The compact string of /v1/preview ("shift,first")
// is accepted too. Errors name the member at fault
// (dst_policy.fall_back); the values are checked by model.DSTPolicy's
// Validate, which the record's Validate calls.
func (o object) dstPolicy() (model.DSTPolicy, error) {
	v := o.raw("dst_policy")
	if v == nil {
		return model.DSTPolicy{}, nil
	}
	if compact, err := o.str("dst_policy"); err == nil {
		return model.ParseDSTPolicy("dst_policy", compact)
	}
	var in object
	if err := json.Unmarshal(v, &in); err != nil || in == nil {
		return model.DSTPolicy{}, fieldError("dst_policy",
			`must be an object such as {"spring_forward": "shift", "fall_back": "first"}, or the same as a string: "shift,first"`)
	}
	var errs model.FieldErrors
	for _, k := range sortedKeys(in) {
		if k != dstPolicyMembers[0] && k != dstPolicyMembers[1] {
			s := model.SuggestField(k, dstPolicyMembers)
			if s != "" {
				s = "dst_policy." + s
			}
			errs.Add(&model.UnknownFieldError{Field: "dst_policy." + k, Suggestion: s})
		}
	}
	str := keep[string](&errs)
	p := model.DSTPolicy{
		SpringForward: model.SpringForward(str(in.str("spring_forward"))),
		FallBack:      model.FallBack(str(in.str("fall_back"))),
	}
	for _, e := range errs {
		if f, ok := e.(*model.FieldError); ok && (f.Field == "spring_forward" || f.Field == "fall_back") {
			f.Field = "dst_policy." + f.Field
		}
	}
	if err := errs.Err(); err != nil {
		return model.DSTPolicy{}, err
	}
	return p, p.Validate()
}

// queryDSTPolicy reads GET /v1/preview's dst_policy parameter, the
// compact form: "shift", "last", "shift,first" (see model.ParseDSTPolicy).
func queryDSTPolicy(c echo.Context) (model.DSTPolicy, error) {
	return model.ParseDSTPolicy("dst_policy", c.QueryParam("dst_policy"))
}

// sortedKeys returns o's field names in order, so errors come in a
// stable order.
func sortedKeys(o object) []string {
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// shownDSTPolicy is the policy a view shows: every member spelt out on a
// schedule whose expression runs on the wall clock, nil on the others,
// which no clock change moves.
func shownDSTPolicy(rec *model.ScheduleRecord) *model.DSTPolicy {
	if !rec.WallClock() {
		return nil
	}
	p := rec.DSTPolicy.Effective()
	return &p
}
