package queue

import (
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/require"
)

// A cursor reads back as it was written in each of its modes, and one no
// page could have written is refused.
func TestListCursorRoundTrip(t *testing.T) {
	t.Parallel()
	s := &Store{cfg: Config{Shards: 4}}
	var a, b string // two ids of shard 2, sorted
	for i := 0; b == ""; i++ {
		if id := "s" + string(rune('a'+i%26)) + string(rune('a'+i/26)); s.shard(id) == 2 {
			if a == "" {
				a = id
			} else if id > a {
				b = id
			}
		}
	}
	for name, c := range map[string]listCursor{
		"scanning":           {shard: 2, zscan: 1234},
		"scanning, left":     {shard: 2, zscan: 7, left: []string{a, b}},
		"ended, left":        {shard: 2, ended: true, left: []string{a}},
		"whole, after an id": {shard: 3, whole: true, after: "x"},
	} {
		got, err := s.parseListCursor(c.String())
		require.NoError(t, err, name)
		require.Equal(t, c.String(), got.String(), name)
		require.Equal(t, c.whole, got.whole, name)
		require.Equal(t, c.ended, got.ended, name)
		require.Equal(t, c.zscan, got.zscan, name)
		require.Equal(t, c.after, got.after, name)
		require.Equal(t, len(c.left), len(got.left), name)
	}
	start, err := s.parseListCursor("")
	require.NoError(t, err)
	require.Equal(t, listCursor{}, start, "the empty cursor starts the walk")

	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for name, text := range map[string]string{
		"two parts":             "1:0",
		"shard out of range":    "4:0:",
		"negative shard":        "-1:0:",
		"zscan not a number":    "1:x:",
		"rest not base64url":    "1:0:***",
		"ids of another shard":  "1:0:" + enc(a),
		"ids out of order":      "2:0:" + enc(b+" "+a),
		"an id that is invalid": "2:e:" + enc("bad id/with slash"),
	} {
		_, err := s.parseListCursor(text)
		require.ErrorIs(t, err, ErrInvalidCursor, name)
	}
}
