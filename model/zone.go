package model

import (
	"fmt"
	"strings"
	"sync"
	"time"

	// Embed the IANA database so zones resolve in a bare container; the
	// system's copy, when present, is still preferred.
	_ "time/tzdata"
)

// zoneCache holds the zones LoadZone has resolved. Only well-formed names
// (see LoadZone) get here, so it holds at most one entry per zone file.
var zoneCache sync.Map // string -> *time.Location

// LoadZone resolves an IANA zone name; "" means UTC. Unknown names are an
// error, never a silent fallback.
//
// "Local" is unknown: a schedule must not depend on the zone of the machine
// that happens to evaluate it. So are the other files of a system's
// zoneinfo directory that are not zones of the IANA database Go embeds
// (localtime, posixrules, the right/ and posix/ copies): they resolve
// differently from host to host, or on some hosts only. Names with empty,
// "." or ".." path segments are unknown too, so that a zone has one
// spelling.
func LoadZone(name string) (*time.Location, error) {
	if name == "" || name == "UTC" {
		return time.UTC, nil
	}
	if loc, ok := zoneCache.Load(name); ok {
		return loc.(*time.Location), nil
	}
	if name == "Local" || name == "localtime" || name == "posixrules" ||
		strings.HasPrefix(name, "right/") || strings.HasPrefix(name, "posix/") || !wellFormedZoneName(name) {
		return nil, fmt.Errorf("unknown time zone %q", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q", name)
	}
	zoneCache.Store(name, loc)
	return loc, nil
}

// wellFormedZoneName reports whether every '/'-separated segment of name
// is a plain file name.
func wellFormedZoneName(name string) bool {
	for seg := range strings.SplitSeq(name, "/") {
		if seg == "" || seg == "." || seg == ".." || strings.ContainsAny(seg, "\\\x00") {
			return false
		}
	}
	return true
}
