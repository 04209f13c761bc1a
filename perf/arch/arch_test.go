package arch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"
)

// graph maps a package to the project packages its non-test code imports,
// every path relative to the module root ("wire/serve").
type graph map[string][]string

// rule is one import arrow the architecture forbids.
type rule struct {
	name string // short name, printed with each violation
	text string // the rule as the package doc states it
	// forbids reports whether package from may not import package to.
	forbids func(from, to string) bool
}

// under reports whether p is root or a package below it.
func under(p, root string) bool { return p == root || strings.HasPrefix(p, root+"/") }

// production reports whether p is built into kvgate's shipped binaries
// (kvgate, kvgate-bridge, kvgate-sim): everything outside perf/ but the
// benchmarking tool, and perf/sim, which those binaries import.
func production(p string) bool {
	return (!under(p, "perf") && p != "cmd/kvgate-bench") || under(p, "perf/sim")
}

// testHelper reports whether p is a test helper package in the style of
// net/http/httptest (servetest, vllmtest).
func testHelper(p string) bool {
	name := path.Base(p)
	return len(name) > len("test") && strings.HasSuffix(name, "test")
}

var rules = []rule{
	{"wire-leaf", "wire imports nothing of the project",
		func(from, to string) bool { return from == "wire" }},
	{"wire-sub", "packages under wire/ (wire/serve, wire/serve/servetest) import wire only",
		func(from, to string) bool { return under(from, "wire") && from != "wire" && to != "wire" }},
	{"kvstore-leaf", "kvstore imports nothing of the project",
		func(from, to string) bool { return under(from, "kvstore") && !under(to, "kvstore") }},
	{"syncring-wire", "syncring imports wire at most",
		func(from, to string) bool { return under(from, "syncring") && !under(to, "syncring") && to != "wire" }},
	{"no-cmd", "nothing outside cmd/ imports cmd/...",
		func(from, to string) bool { return !under(from, "cmd") && under(to, "cmd") }},
	{"perf-not-production", "production packages import nothing of perf/ but perf/sim (cmd/kvgate-bench may)",
		func(from, to string) bool { return production(from) && under(to, "perf") && !under(to, "perf/sim") }},
	{"test-helpers", "test helpers (*test packages) are imported by tests and other helpers only",
		func(from, to string) bool { return production(from) && !testHelper(from) && testHelper(to) }},
}

// violation is one import arrow and the rule it breaks.
type violation struct {
	from, to string
	rule     *rule
}

func (v violation) String() string {
	return fmt.Sprintf("%s imports %s: breaks %s (%s)", v.from, v.to, v.rule.name, v.rule.text)
}

// check returns every arrow of g that a rule forbids, sorted by importer,
// then imported package, then rule.
func check(g graph) []violation {
	var out []violation
	for from, imports := range g {
		for _, to := range imports {
			for i := range rules {
				if from != to && rules[i].forbids(from, to) {
					out = append(out, violation{from, to, &rules[i]})
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b violation) int {
		return strings.Compare(a.from+"\x00"+a.to+"\x00"+a.rule.name, b.from+"\x00"+b.to+"\x00"+b.rule.name)
	})
	return out
}

// listed is what the test reads of one package in go list -json's output.
type listed struct {
	ImportPath string
	Imports    []string
	Error      *struct{ Err string }
}

// addListed adds the project packages of go list -json's output to g, with
// their project imports, paths made relative to module.
func addListed(g graph, module string, r io.Reader) (errs []string, err error) {
	rel := func(p string) (string, bool) {
		if p == module {
			return ".", true
		}
		r, ok := strings.CutPrefix(p, module+"/")
		return r, ok
	}
	dec := json.NewDecoder(r)
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return errs, nil
		} else if err != nil {
			return errs, fmt.Errorf("decoding go list output: %w", err)
		}
		from, ok := rel(p.ImportPath)
		if !ok {
			continue
		}
		if p.Error != nil {
			errs = append(errs, from+": "+p.Error.Err)
		}
		if _, seen := g[from]; !seen {
			g[from] = nil
		}
		for _, imp := range p.Imports {
			if to, ok := rel(imp); ok && !slices.Contains(g[from], to) {
				g[from] = append(g[from], to)
			}
		}
	}
}

func TestRulesCatchViolations(t *testing.T) {
	// clean is the intended layout, one arrow of each kind the rules allow.
	clean := graph{
		"wire":                           nil,
		"wire/serve":                     {"wire"},
		"wire/serve/servetest":           {"wire"},
		"kvstore":                        nil,
		"syncring":                       {"wire"},
		"ebpf":                           nil,
		"dataplane/engine":               {"kvstore", "wire"},
		"dataplane/route":                {"dataplane/engine", "kvstore", "syncring", "wire"},
		"dataplane/gateway":              {"dataplane/api", "dataplane/route", "dataplane/httpx", "perf/sim"},
		"dataplane/bridge/vllm":          {"kvstore", "wire", "wire/serve"},
		"dataplane/bridge/vllm/vllmtest": {"dataplane/bridge/vllm", "wire/serve/servetest"},
		"perf/sim":                       {"kvstore", "wire", "wire/serve"},
		"perf/cluster":                   {"dataplane/route", "perf/sim", "perf/workload"},
		"perf/e2e":                       {"dataplane/bridge/vllm/vllmtest", "wire/serve/servetest"},
		"cmd/kvgate":                     {"dataplane/gateway", "perf/sim", "syncring"},
		"cmd/kvgate-sim":                 {"perf/sim", "wire"},
		"cmd/kvgate-bench":               {"perf/loadgen", "perf/cluster", "perf/report", "dataplane/bridge/vllm/vllmtest"},
	}
	for _, v := range check(clean) {
		t.Errorf("the clean layout is refused: %v", v)
	}

	type arrow struct{ from, to, rule string }
	for _, tc := range []struct {
		name string
		add  graph // arrows added to the clean layout
		want []arrow
	}{
		{"wire imports kvstore", graph{"wire": {"kvstore"}}, []arrow{{"wire", "kvstore", "wire-leaf"}}},
		{"wire imports syncring", graph{"wire": {"syncring"}}, []arrow{{"wire", "syncring", "wire-leaf"}}},
		{"wire/serve imports kvstore", graph{"wire/serve": {"wire", "kvstore"}},
			[]arrow{{"wire/serve", "kvstore", "wire-sub"}}},
		{"servetest imports wire/serve", graph{"wire/serve/servetest": {"wire", "wire/serve"}},
			[]arrow{{"wire/serve/servetest", "wire/serve", "wire-sub"}}},
		{"kvstore imports wire", graph{"kvstore": {"wire"}}, []arrow{{"kvstore", "wire", "kvstore-leaf"}}},
		{"syncring imports kvstore", graph{"syncring": {"wire", "kvstore"}},
			[]arrow{{"syncring", "kvstore", "syncring-wire"}}},
		{"syncring imports the router", graph{"syncring": {"wire", "dataplane/route"}},
			[]arrow{{"syncring", "dataplane/route", "syncring-wire"}}},
		{"dataplane imports cmd", graph{"dataplane/gateway": {"cmd/kvgate"}},
			[]arrow{{"dataplane/gateway", "cmd/kvgate", "no-cmd"}}},
		{"perf imports cmd", graph{"perf/e2e": {"cmd/kvgate-bench"}},
			[]arrow{{"perf/e2e", "cmd/kvgate-bench", "no-cmd"}}},
		{"router imports a workload", graph{"dataplane/route": {"perf/workload"}},
			[]arrow{{"dataplane/route", "perf/workload", "perf-not-production"}}},
		{"kvgate imports the load generator", graph{"cmd/kvgate": {"perf/loadgen"}},
			[]arrow{{"cmd/kvgate", "perf/loadgen", "perf-not-production"}}},
		{"bridge imports the cluster simulation", graph{"cmd/kvgate-bridge": {"perf/cluster"}},
			[]arrow{{"cmd/kvgate-bridge", "perf/cluster", "perf-not-production"}}},
		{"perf/sim pulls in the rest of perf", graph{"perf/sim": {"perf/workload"}},
			[]arrow{{"perf/sim", "perf/workload", "perf-not-production"}}},
		{"gateway imports servetest", graph{"dataplane/gateway": {"wire/serve/servetest"}},
			[]arrow{{"dataplane/gateway", "wire/serve/servetest", "test-helpers"}}},
		{"vllm imports its own fake", graph{"dataplane/bridge/vllm": {"dataplane/bridge/vllm/vllmtest"}},
			[]arrow{{"dataplane/bridge/vllm", "dataplane/bridge/vllm/vllmtest", "test-helpers"}}},
		{"simulator imports a fake", graph{"perf/sim": {"dataplane/bridge/vllm/vllmtest"}},
			[]arrow{{"perf/sim", "dataplane/bridge/vllm/vllmtest", "test-helpers"}}},
		{"one arrow, two rules", graph{"kvstore": {"perf/workload"}}, []arrow{
			{"kvstore", "perf/workload", "kvstore-leaf"}, {"kvstore", "perf/workload", "perf-not-production"}}},
		{"several packages at once", graph{"wire": {"kvstore"}, "syncring": {"wire", "ebpf"}}, []arrow{
			{"syncring", "ebpf", "syncring-wire"}, {"wire", "kvstore", "wire-leaf"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := graph{}
			for p, imports := range clean {
				g[p] = slices.Clone(imports)
			}
			for p, imports := range tc.add {
				g[p] = imports
			}
			var got []arrow
			for _, v := range check(g) {
				got = append(got, arrow{v.from, v.to, v.rule.name})
				if !strings.Contains(v.String(), v.rule.text) {
					t.Errorf("%v does not say the rule", v)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("violations\n got %v\nwant %v", got, tc.want)
			}
		})
	}
}

func TestAddListed(t *testing.T) {
	out := `{"ImportPath": "example.com/m/a", "Imports": ["fmt", "example.com/m/b", "example.com/other/c"]}
{"ImportPath": "example.com/m/b", "Imports": ["example.com/mb"], "Error": {"Err": "no Go files"}}
{"ImportPath": "example.com/mb", "Imports": ["example.com/m/a"]}
{"ImportPath": "example.com/m/a", "Imports": ["example.com/m/b", "example.com/m/d"]}`
	g := graph{}
	errs, err := addListed(g, "example.com/m", strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	want := graph{"a": {"b", "d"}, "b": nil}
	if len(g) != len(want) || !slices.Equal(g["a"], want["a"]) || g["b"] != nil {
		t.Errorf("graph %v, want %v", g, want)
	}
	if !slices.Equal(errs, []string{"b: no Go files"}) {
		t.Errorf("errors %q", errs)
	}
}

// builds are the configurations whose imports are checked: the default
// build, the invariants build of make test, and a non-Linux one (the
// *_other.go fallbacks of ebpf and the daemon).
var builds = []struct {
	name string
	env  []string
	args []string
}{
	{"default", nil, nil},
	{"invariants", nil, []string{"-tags", "invariants"}},
	{"darwin", []string{"GOOS=darwin", "GOARCH=arm64", "CGO_ENABLED=0"}, nil},
}

// TestTree checks the rules on the project as it is.
func TestTree(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the go command is not on PATH (%v): cannot list the project's packages", err)
	}
	mod, err := exec.Command(goCmd, "list", "-m", "-f", "{{.Path}}\n{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	module, root, _ := strings.Cut(strings.TrimSpace(string(mod)), "\n")
	g := graph{}
	for _, b := range builds {
		cmd := exec.Command(goCmd, append(append([]string{"list", "-e", "-json"}, b.args...), "./...")...)
		cmd.Dir, cmd.Env = root, append(os.Environ(), b.env...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list (%s build): %v\n%s", b.name, err, stderr.Bytes())
		}
		errs, err := addListed(g, module, bytes.NewReader(out))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range errs {
			t.Logf("%s build: %s (its imports may be incomplete)", b.name, e)
		}
	}
	// A listing that missed the tree would pass every rule.
	for _, p := range []string{"wire", "wire/serve", "kvstore", "syncring", "perf/sim", "cmd/kvgate"} {
		if _, ok := g[p]; !ok {
			t.Fatalf("go list in %s did not list %s: %d packages listed", root, p, len(g))
		}
	}
	for _, v := range check(g) {
		t.Error(v)
	}
	t.Logf("%d packages, %d rules", len(g), len(rules))
}
