package tokenize

import (
	"slices"
	"testing"
)

// TestGrow: the first continuation writes in place and owns the room past
// it; one with the same elements shares them and owns nothing (its own
// continuation copies), one with others copies; a continuation over
// frozen elements grows in place only if it starts with them; nobody's
// elements change.
func TestGrow(t *testing.T) {
	have := append(make([]int, 0, 10), 1, 2, 3)
	var g growth
	a, ownsA := grow(&g, have, []int{4, 5})
	b, ownsB := grow(&g, have, []int{4, 5})
	c, ownsC := grow(&g, have, []int{9})
	if !ownsA || ownsB || !ownsC || &a[0] != &have[0] || &b[0] != &have[0] || &c[0] == &have[0] {
		t.Fatalf("owns %v %v %v; shared %v %v %v", ownsA, ownsB, ownsC, &a[0] == &have[0], &b[0] == &have[0], &c[0] == &have[0])
	}
	var ga, gb growth
	gb.init(ownsB, 0)
	b2, _ := grow(&gb, b, []int{6})
	a2, _ := grow(&ga, a, []int{7})
	if &b2[0] == &have[0] || &a2[0] != &have[0] {
		t.Fatal("b's continuation wrote in place, or a's did not")
	}
	// a2's last element stands for a generation prompt: frozen.
	var gf, gf2 growth
	gf.init(true, len(a2))
	gf2.init(true, len(a2))
	frozen := a2[:len(a2)-1]
	f, ownsF := grow(&gf, frozen, []int{7, 8})
	other, _ := grow(&gf2, frozen, []int{6})
	if !ownsF || &f[0] != &have[0] || &other[0] == &have[0] {
		t.Fatalf("over frozen: in place %v (owns %v), other copied %v", &f[0] == &have[0], ownsF, &other[0] != &have[0])
	}
	for _, c := range []struct{ got, want []int }{{have, []int{1, 2, 3}}, {a, []int{1, 2, 3, 4, 5}}, {b, []int{1, 2, 3, 4, 5}},
		{c, []int{1, 2, 3, 9}}, {a2, []int{1, 2, 3, 4, 5, 7}}, {b2, []int{1, 2, 3, 4, 5, 6}}, {f, []int{1, 2, 3, 4, 5, 7, 8}},
		{other, []int{1, 2, 3, 4, 5, 6}}} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%v, want %v", c.got, c.want)
		}
	}
	if full, owns := grow(&ga, a2, make([]int, 100)); !owns || cap(full) < 106 || &full[0] == &have[0] {
		t.Fatal("no room: not copied")
	}
}
