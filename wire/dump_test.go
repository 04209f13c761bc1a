package wire

import (
	"encoding/hex"
	"fmt"
	"reflect"
	"strings"
)

// dump renders a message as "field: value" lines, the readable half of a
// golden vector. Views print their contents, so nil and empty look the same.
func dump(m Message) string {
	var sb strings.Builder
	dumpValue(&sb, "", reflect.ValueOf(m).Elem())
	return sb.String()
}

func dumpValue(sb *strings.Builder, prefix string, v reflect.Value) {
	t := v.Type()
	for i := range t.NumField() {
		f, fv := t.Field(i), v.Field(i)
		if f.Anonymous {
			dumpValue(sb, prefix, fv)
			continue
		}
		name := prefix + f.Name
		switch x := fv.Interface().(type) {
		case []byte:
			fmt.Fprintf(sb, "%s: %q\n", name, x)
		case [32]byte:
			fmt.Fprintf(sb, "%s: %s\n", name, hex.EncodeToString(x[:]))
		case Tokens:
			fmt.Fprintf(sb, "%s: %v\n", name, x.AppendTo(nil))
		case Hashes:
			hs := x.AppendTo(nil)
			parts := make([]string, len(hs))
			for j, h := range hs {
				parts[j] = fmt.Sprintf("%#016x", h)
			}
			fmt.Fprintf(sb, "%s: [%s]\n", name, strings.Join(parts, " "))
		case MMItems:
			for j := range x.Len() {
				fmt.Fprintf(sb, "%s[%d]: %+v\n", name, j, x.At(j))
			}
		case Media: // media_test.go: the bytes are MEDIA frames' own vectors
			for j := range x.Len() {
				it := x.At(j)
				fmt.Fprintf(sb, "%s[%d]: id %x mime %q %dx%d size %d\n", name, j, it.ID, it.MIME, it.Width, it.Height, x.Size(j))
			}
		case LogitBias:
			for j := range x.Len() {
				tok, b := x.At(j)
				fmt.Fprintf(sb, "%s[%d]: %d %+g\n", name, j, tok, b)
			}
		case Logprobs:
			fmt.Fprintf(sb, "%s.TopN: %d\n", name, x.TopN())
			for j, en := range x.Entries() {
				fmt.Fprintf(sb, "%s[%d]: %g %+v\n", name, j, en.Logprob, en.Top)
			}
		case Sampling:
			dumpValue(sb, name+".", fv)
		case Trace:
			fmt.Fprintf(sb, "%s: %s %q\n", name, x.Traceparent(), x.State)
		case TextEnds:
			fmt.Fprintf(sb, "%s: %s\n", name, x)
		case []string, []LoRA, []TierCapacity, []TierUsage:
			fmt.Fprintf(sb, "%s: %+v\n", name, x)
		case []Event:
			for j := range x {
				dumpValue(sb, fmt.Sprintf("%s[%d].", name, j), reflect.ValueOf(x[j]))
			}
		case fmt.Stringer:
			fmt.Fprintf(sb, "%s: %s (%d)\n", name, x, fv.Convert(reflect.TypeFor[uint64]()).Uint())
		default:
			fmt.Fprintf(sb, "%s: %v\n", name, x)
		}
	}
}
