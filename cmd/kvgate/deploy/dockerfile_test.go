package deploy

import (
	"bufio"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// dockerfile is what TestDockerfile reads of the Dockerfile.
type dockerfile struct {
	goVersion string   // ARG GO_VERSION
	froms     []string // FROM images, in order
	runs      []string // RUN commands of the build stage
	user      string
	expose    []int
}

func readDockerfile(t *testing.T) *dockerfile {
	t.Helper()
	f, err := os.Open("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := &dockerfile{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		instr, rest, _ := strings.Cut(line, " ")
		switch instr {
		case "ARG":
			if v, ok := strings.CutPrefix(rest, "GO_VERSION="); ok {
				d.goVersion = v
			}
		case "FROM":
			d.froms = append(d.froms, strings.Fields(rest)[0])
		case "RUN":
			if len(d.froms) == 1 {
				d.runs = append(d.runs, rest)
			}
		case "USER":
			d.user = rest
		case "EXPOSE":
			for _, p := range strings.Fields(rest) {
				n, err := strconv.Atoi(p)
				if err != nil {
					t.Fatalf("EXPOSE %q", p)
				}
				d.expose = append(d.expose, n)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDockerfile: the image builds with the Go go.mod asks for, runs as
// the user and exposes the ports the Deployment uses, and its build step,
// run here as written (into a temporary directory instead of /out/), gives
// static binaries that start (no docker engine is needed).
func TestDockerfile(t *testing.T) {
	d := readDockerfile(t)
	mod, err := os.ReadFile("../../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	if goLine == nil || d.goVersion != string(goLine[1]) {
		t.Fatalf("ARG GO_VERSION=%s, go.mod asks for go %s", d.goVersion, goLine[1])
	}
	if len(d.froms) != 2 || d.froms[0] != "golang:${GO_VERSION}-bookworm" || !strings.HasPrefix(d.froms[1], "gcr.io/distroless/static") {
		t.Fatalf("stages %v: want the Go builder, then distroless static", d.froms)
	}

	m := loadManifests(t)
	pod := m.deploy.Spec.Template.Spec
	if want := strconv.FormatInt(*pod.SecurityContext.RunAsUser, 10) + ":" + strconv.FormatInt(*pod.SecurityContext.RunAsGroup, 10); d.user != want {
		t.Errorf("USER %s, the Deployment runs as %s", d.user, want)
	}
	var ports []int
	for _, p := range pod.Containers[0].Ports {
		ports = append(ports, int(p.ContainerPort))
	}
	slices.Sort(ports)
	expose := slices.Sorted(slices.Values(d.expose))
	if !slices.Equal(expose, ports) {
		t.Errorf("EXPOSE %v, the Deployment's container ports %v", expose, ports)
	}

	build := d.runs[len(d.runs)-1]
	if !strings.Contains(build, "go build") || !strings.Contains(build, "-o /out/") {
		t.Fatalf("the last RUN is not the build into /out/: %q", build)
	}
	if testing.Short() {
		t.Skip("-short: the build step is not run")
	}
	out := t.TempDir()
	cmd := exec.Command("sh", "-c", strings.ReplaceAll(build, "/out/", out+"/"))
	cmd.Dir = "../../.."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the Dockerfile's build step: %v\n%s", err, b)
	}
	for _, name := range []string{"kvgate", "kvgate-bridge", "kvgate-sim"} {
		bin := filepath.Join(out, name)
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s asks for a dynamic loader: distroless static has none", name)
			}
		}
		f.Close()
	}
	// The image's default command, checked without serving.
	args := append([]string{"--check-config"}, imageCmd(t)...)
	if b, err := exec.Command(filepath.Join(out, "kvgate"), args...).CombinedOutput(); err != nil {
		t.Fatalf("kvgate %v: %v\n%s", args, err, b)
	}
}

// imageCmd returns the Dockerfile's CMD (a JSON array).
func imageCmd(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^CMD \[(.*)\]$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("no CMD [...] in the Dockerfile")
	}
	var args []string
	for _, a := range strings.Split(string(m[1]), ",") {
		s, err := strconv.Unquote(strings.TrimSpace(a))
		if err != nil {
			t.Fatalf("CMD element %q: %v", a, err)
		}
		args = append(args, s)
	}
	return args
}
