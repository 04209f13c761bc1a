package tokenize

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/ardanlabs/jinja"
)

// slowJSONValue is jsonValue through encoding/json's decoder alone.
func slowJSONValue(raw []byte) (jinja.Value, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	v, err := decodeValue(d, 0)
	if err != nil {
		return v, err
	}
	if _, err := d.Token(); err != io.EOF {
		return jinja.Undefined(), errSlowJSON
	}
	return v, nil
}

var jsonSeeds = []string{
	`[{"role":"user","content":"hi"}]`, `{"a":1,"b":[1.5,-0,2e10,true,false,null],"a":"dup"}`,
	`"esc \n \"q\" \u00e9 \ud83d\ude00 \ud800"`, "\"bad \xff utf8\"", `[]`, `{}`, ` [ 1 , 2 ] `,
	`[1,]`, `{"a" 1}`, `01`, `-`, `1.`, `1e`, `tru`, `[1] x`, "\"ctl \x01\"", `{"k":{"n":[{"x":[]}]}}`,
	`[{"role":"assistant","content":"<think>a</think>b","tool_calls":[{"function":{"name":"f","arguments":"{}"}}]}]`,
}

// FuzzFastJSONValue: the one-pass converter gives the decoder's value, and
// refuses what the decoder refuses.
func FuzzFastJSONValue(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		want, wantErr := slowJSONValue(raw)
		got, err := fastJSONValue(raw)
		if err != nil {
			if wantErr == nil {
				t.Fatalf("%q: refused, the decoder takes it", raw)
			}
			return
		}
		if wantErr != nil {
			t.Fatalf("%q: taken, the decoder refuses it (%v)", raw, wantErr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n got %#v\nwant %#v", raw, got, want)
		}
	})
}

// TestPlainRole: exactly role and content, both strings, role unescaped.
func TestPlainRole(t *testing.T) {
	for raw, want := range map[string]string{
		`{"role":"user","content":"a"}`: "user", ` { "content" : "x\"y" , "role" : "assistant" } `: "assistant",
		`{"role":"system","content":""}`: "system", `{"role":"tool","content":"a"}`: "",
		`{"role":"user","content":"a","name":"n"}`: "", `{"role":"user"}`: "", `{"role":"user","content":["a"]}`: "",
		`{"role":"us\u0065r","content":"a"}`: "", `{"role":"user","role":"user"}`: "", `{"role":"user" "content":"a"}`: "",
		`{"role":"user","content":"a"}x`: "", `["role","user"]`: "",
	} {
		got, _, _, err := plainRole([]byte(raw))
		if got != want || (err == nil) != (want != "") {
			t.Errorf("%s: %q, %v; want %q", raw, got, err, want)
		}
	}
	_, content, escaped, _ := plainRole([]byte(` { "content" : "x\"y" , "role" : "assistant" } `))
	if string(content) != `x\"y` || !escaped {
		t.Errorf("content %q, escaped %v", content, escaped)
	}
}

// TestNextElement splits random arrays (strings with quotes, backslash
// runs and brackets, nested values) element by element and compares the
// pieces with encoding/json's.
func TestNextElement(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	pieces := []string{`"`, `\`, `\\`, `\"`, `[`, `]`, `{`, `}`, `,`, `a`, ` `, "\n", `日`}
	str := func() string {
		var b strings.Builder
		for range r.IntN(8) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		return b.String()
	}
	for range 500 {
		var arr []any
		for range 1 + r.IntN(5) {
			switch r.IntN(3) {
			case 0:
				arr = append(arr, str())
			case 1:
				arr = append(arr, map[string]any{"role": str(), "content": []any{str(), 1.5}})
			default:
				arr = append(arr, []any{str(), map[string]any{str(): str()}})
			}
		}
		raw, _ := json.MarshalIndent(arr, "", " ")
		var want []json.RawMessage
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatal(err)
		}
		at := 1
		for i := range want {
			end, more, ok := nextElement(raw, at)
			if !ok || more != (i < len(want)-1) || string(trimElement(raw, at, end)) != string(want[i]) {
				t.Fatalf("%s: element %d: %q, more %v, ok %v", raw, i, trimElement(raw, at, max(end, at)), more, ok)
			}
			at = end + 1
		}
	}
}
