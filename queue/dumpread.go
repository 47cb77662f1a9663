package queue

import (
	"strconv"
	"unsafe"
)

// A due schedule's hash is read by DUMP in TickDue's fast path, not by
// HGETALL. HGETALL costs Redis a reply per field and value (30 for a
// plain schedule, about 24k instructions: a fifth of what a cold burst's
// run cost it), and the scheduler a string per reply and a map. DUMP
// sends the hash's listpack whole as one string (about 12k, most of it
// the LZF compression Redis applies to it), which readHashDump turns
// back into the fields and values HGETALL would have given: listpack
// keeps a value that reads as a canonical integer as that integer, and
// strconv.FormatInt writes it back as the same digits. A payload of any
// other kind (a hash too big for a listpack, a later Redis's encoding,
// a corrupt one) reads as not ok, and that schedule is read by HGETALL.

const (
	rdbEncLZF = 3 // RDB_ENC_LZF: a string compressed by LZF
)

// readHashDump returns the fields and values of the hash whose DUMP
// payload is p, as HGETALL gives them; ok is false when p is not a
// listpack-encoded hash (type 16) with a valid checksum.
func readHashDump(p string) (h map[string]string, ok bool) {
	// Type, the listpack as an RDB string, the RDB version (2 bytes) and
	// the CRC-64 of everything before it (8 bytes).
	if len(p) < 1+1+2+8 || p[0] != rdbTypeHashListpack {
		return nil, false
	}
	body := p[:len(p)-8]
	// The checksum recorddump.go writes, over body in place (not copied).
	if leUint(p[len(p)-8:]) != redisCRC64(unsafe.Slice(unsafe.StringData(body), len(body))) {
		return nil, false
	}
	lp, rest, ok := readRDBString(body[1 : len(body)-2])
	if !ok || len(rest) != 0 {
		return nil, false
	}
	return readListpack(lp)
}

// readRDBString reads one RDB string from b (rdbGenericLoadStringObject
// for a raw or an LZF string): the string and what follows it.
func readRDBString(b string) (s, rest string, ok bool) {
	n, enc, b, ok := readRDBLen(b)
	if !ok {
		return "", "", false
	}
	if !enc {
		if uint64(len(b)) < n {
			return "", "", false
		}
		return b[:n], b[n:], true
	}
	if n != rdbEncLZF {
		return "", "", false // an integer-encoded string: not a listpack
	}
	clen, enc1, b, ok := readRDBLen(b)
	if !ok || enc1 {
		return "", "", false
	}
	ulen, enc2, b, ok := readRDBLen(b)
	if !ok || enc2 || uint64(len(b)) < clen || ulen > 1<<20 {
		return "", "", false
	}
	out, ok := lzfDecompress(b[:clen], int(ulen))
	if !ok {
		return "", "", false
	}
	return out, b[clen:], true
}

// readRDBLen reads an RDB length (rdbLoadLenByRef); enc says it is a
// special encoding's number instead (the top two bits set).
func readRDBLen(b string) (n uint64, enc bool, rest string, ok bool) {
	if len(b) == 0 {
		return 0, false, "", false
	}
	switch c := b[0]; c >> 6 {
	case 0:
		return uint64(c & 0x3F), false, b[1:], true
	case 1:
		if len(b) < 2 {
			return 0, false, "", false
		}
		return uint64(c&0x3F)<<8 | uint64(b[1]), false, b[2:], true
	case 3:
		return uint64(c & 0x3F), true, b[1:], true
	}
	switch {
	case b[0] == 0x80 && len(b) >= 5:
		return beUint(b[1:5]), false, b[5:], true
	case b[0] == 0x81 && len(b) >= 9:
		return beUint(b[1:9]), false, b[9:], true
	}
	return 0, false, "", false
}

// lzfDecompress is liblzf's lzf_decompress: in must expand to exactly
// n bytes.
func lzfDecompress(in string, n int) (string, bool) {
	out := make([]byte, 0, n)
	for i := 0; i < len(in); {
		ctrl := int(in[i])
		i++
		if ctrl < 1<<5 { // a literal run of ctrl+1 bytes
			l := ctrl + 1
			if i+l > len(in) || len(out)+l > n {
				return "", false
			}
			out = append(out, in[i:i+l]...)
			i += l
			continue
		}
		// A back reference: length and offset.
		l := ctrl >> 5
		if l == 7 {
			if i >= len(in) {
				return "", false
			}
			l += int(in[i])
			i++
		}
		if i >= len(in) {
			return "", false
		}
		ref := len(out) - (ctrl&0x1F)<<8 - 1 - int(in[i])
		i++
		l += 2
		if ref < 0 || len(out)+l > n {
			return "", false
		}
		for k := range l { // byte by byte: the reference may overlap what it writes
			out = append(out, out[ref+k])
		}
	}
	if len(out) != n || n == 0 {
		return "", false
	}
	// out is not written again: the string shares it rather than copy it.
	return unsafe.String(&out[0], n), true
}

// readListpack returns a listpack's entries, taken as field, value pairs,
// integers written in decimal; ok is false unless it has an even number
// of entries, its header's sizes and every entry's back length are right.
func readListpack(lp string) (map[string]string, bool) {
	if len(lp) < 7 || leUint(lp[:4]) != uint64(len(lp)) || lp[len(lp)-1] != 0xFF {
		return nil, false
	}
	count := int(leUint(lp[4:6]))
	out := make(map[string]string, min(count, 256)/2)
	var field string
	entries := 0
	i, end := 6, len(lp)-1
	for i < end {
		start := i
		c := lp[i]
		var (
			v     int64
			isInt = true
			s     string
			l     int // the string's length
		)
		switch {
		case c < 0x80: // 7-bit unsigned integer
			v, i = int64(c), i+1
		case c&0xC0 == 0x80: // string up to 63 bytes
			l, i = int(c&0x3F), i+1
			isInt = false
		case c&0xE0 == 0xC0: // 13-bit signed integer
			if i+2 > end {
				return nil, false
			}
			u := int64(c&0x1F)<<8 | int64(lp[i+1])
			if u >= 1<<12 {
				u -= 1 << 13
			}
			v, i = u, i+2
		case c&0xF0 == 0xE0: // string up to 4095 bytes
			if i+2 > end {
				return nil, false
			}
			l, i = int(c&0x0F)<<8|int(lp[i+1]), i+2
			isInt = false
		case c == 0xF0: // string with a 32-bit length
			if i+5 > end {
				return nil, false
			}
			l, i = int(leUint(lp[i+1:i+5])), i+5
			isInt = false
		case c >= 0xF1 && c <= 0xF4: // 16, 24, 32 and 64-bit integers
			w := [...]int{2, 3, 4, 8}[c-0xF1]
			if i+1+w > end {
				return nil, false
			}
			u := leUint(lp[i+1 : i+1+w])
			shift := uint(64 - 8*w)
			v, i = int64(u<<shift)>>shift, i+1+w // sign-extended
		default:
			return nil, false
		}
		if isInt {
			s = strconv.FormatInt(v, 10)
		} else {
			if l < 0 || i+l > end {
				return nil, false
			}
			s, i = lp[i:i+l], i+l
		}
		// The entry's back length: its encoding and data, 7 bits a byte.
		el := i - start
		bl := backlenSize(el)
		if i+bl > end || backlenAt(lp, i, bl) != el {
			return nil, false
		}
		i += bl
		if entries%2 == 0 {
			field = s
		} else {
			out[field] = s
		}
		entries++
	}
	if i != end || entries%2 != 0 || (count != 65535 && count != entries) {
		return nil, false
	}
	return out, true
}

// backlenAt reads the bl-byte back length at lp[i:]: its first byte
// holds the highest 7 bits, every byte but the first has bit 7 set.
func backlenAt(lp string, i, bl int) int {
	v := 0
	for k := range bl {
		c := int(lp[i+k])
		if k > 0 {
			c &= 127
		}
		v = v<<7 | c
	}
	return v
}

// backlenSize is how many bytes lpEncodeBacklen gives a length of l.
func backlenSize(l int) int {
	switch {
	case l <= 127:
		return 1
	case l < 16383:
		return 2
	case l < 2097151:
		return 3
	case l < 268435455:
		return 4
	}
	return 5
}

// leUint reads up to 8 bytes of b as a little-endian number, beUint as a
// big-endian one.
func leUint(b string) uint64 {
	var v uint64
	for i := len(b) - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

func beUint(b string) uint64 {
	var v uint64
	for i := 0; i < len(b); i++ {
		v = v<<8 | uint64(b[i])
	}
	return v
}
