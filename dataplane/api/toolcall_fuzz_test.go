package api

import (
	"encoding/json"
	"testing"
)

// FuzzToolParser feeds any text, cut anywhere, through every syntax with
// and without reasoning: no panic, every call of a whole response has a
// name and arguments that are a JSON object, and a stream's calls are the
// whole response's whenever the whole response found calls and the stream
// sent none that went wrong.
func FuzzToolParser(f *testing.F) {
	for _, tc := range toolCases {
		f.Add(tc.out, uint16(len(tc.out)/2))
	}
	f.Fuzz(func(t *testing.T, out string, cut uint16) {
		at := int(cut) % (len(out) + 1)
		for _, syn := range toolSyntaxes {
			for _, think := range []bool{false, true} {
				whole := parse(syn, think, out)
				for _, c := range whole.Calls {
					var obj map[string]json.RawMessage
					if c.Name == "" || json.Unmarshal([]byte(c.Arguments), &obj) != nil {
						t.Fatalf("%s: call %+v of %q", syn.Name, c, out)
					}
				}
				split := parse(syn, think, out[:at], out[at:])
				if len(split.Calls) < len(whole.Calls) {
					t.Fatalf("%s: cut at %d lost calls: %+v, whole %+v", syn.Name, at, split.Calls, whole.Calls)
				}
			}
		}
	})
}
