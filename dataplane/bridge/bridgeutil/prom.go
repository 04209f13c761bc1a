package bridgeutil

import (
	"math"
	"strconv"
	"strings"
)

// SplitSample parses one sample line of the Prometheus text format,
// `name{k="v",...} value [timestamp]`; ok is false for anything else
// (comments and blank lines included).
func SplitSample(line string) (name string, labels map[string]string, value float64, ok bool) {
	rest := line
	if i := strings.IndexAny(rest, "{ "); i > 0 {
		name, rest = rest[:i], rest[i:]
	} else {
		return "", nil, 0, false
	}
	labels = map[string]string{}
	if strings.HasPrefix(rest, "{") {
		end := strings.LastIndex(rest, "}")
		if end < 0 {
			return "", nil, 0, false
		}
		for _, kv := range splitLabels(rest[1:end]) {
			k, v, found := strings.Cut(kv, "=")
			if found {
				labels[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"`)
			}
		}
		rest = rest[end+1:]
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return "", nil, 0, false
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	return name, labels, v, err == nil
}

// splitLabels splits on commas outside quotes.
func splitLabels(s string) []string {
	var out []string
	inQuote, start := false, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			inQuote = !inQuote
		case ',':
			if !inQuote {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// Count turns a scraped gauge into a count. The engine's text is not
// trusted to be sane: Go leaves converting a NaN, negative or too large
// float to an integer to the platform (-1 reads as 4294967295 on amd64),
// so such values are clamped first.
func Count(v float64) uint32 {
	switch {
	case !(v > 0):
		return 0
	case v >= math.MaxUint32:
		return math.MaxUint32
	}
	return uint32(v)
}
