package api

// ObjectStr exposes object.str to the external tests.
func ObjectStr(body map[string][]byte, name string) (string, error) {
	o := object{}
	for k, v := range body {
		o[k] = v
	}
	return o.str(name)
}
