//go:build linux

package scripttest

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Lookup decodes a JSON document and returns the value at path (dot-separated
// object keys and array indexes) as text: strings without quotes, numbers and
// booleans as JSON writes them, objects and arrays as compact JSON.
func Lookup(doc []byte, path string) (string, error) {
	var v any
	dec := json.NewDecoder(strings.NewReader(string(doc)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	for _, key := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[key]; !ok {
				return "", fmt.Errorf("no member %q", key)
			}
		case []any:
			i, err := strconv.Atoi(key)
			if err != nil || i < 0 || i >= len(x) {
				return "", fmt.Errorf("bad index %q for an array of %d", key, len(x))
			}
			v = x[i]
		default:
			return "", fmt.Errorf("%q: not an object or array", key)
		}
	}
	switch x := v.(type) {
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	}
	b, err := json.Marshal(v)
	return string(b), err
}
