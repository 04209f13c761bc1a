// Package deploy holds kvgate's deployment files (systemd, Kubernetes,
// Prometheus rules, a Grafana dashboard); its tests check them.
package deploy

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// unmarshalStrict decodes YAML into v as the API server's strict field
// validation does: duplicate keys, unknown fields and fields spelt in
// another case are refused (encoding/json, under sigs.k8s.io/yaml's own
// UnmarshalStrict, matches field names case-insensitively, so clusterIp
// would pass for clusterIP).
func unmarshalStrict(b []byte, v any) error {
	j, err := yaml.YAMLToJSONStrict(b)
	if err != nil {
		return err
	}
	strict, err := sigsjson.UnmarshalStrict(j, v) // every strict check
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

// decodeStrict decodes a manifest into v (unmarshalStrict).
func decodeStrict(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := unmarshalStrict(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// manifests decodes every Kubernetes manifest by its kind.
type manifests struct {
	deploy             appsv1.Deployment
	ring, http, engine corev1.Service
	secret             corev1.Secret
	ns                 corev1.Namespace
	pdb                policyv1.PodDisruptionBudget
}

func loadManifests(t *testing.T) *manifests {
	m := &manifests{}
	for file, v := range map[string]any{"deployment.yaml": &m.deploy, "service-ring.yaml": &m.ring, "service.yaml": &m.http,
		"service-engines.yaml": &m.engine, "secret.yaml": &m.secret, "namespace.yaml": &m.ns, "pdb.yaml": &m.pdb} {
		decodeStrict(t, filepath.Join("kubernetes", file), v)
	}
	return m
}

// flagValue returns the value of --name=value among args.
func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// TestKubernetesManifests: each manifest decodes strictly into its API
// type, and they fit together: the ring and engines found through their
// headless Services at the right ports, readiness on /ready, a preStop
// before the drain, the ring secret from the Secret, a PodDisruptionBudget
// over the replicas.
func TestKubernetesManifests(t *testing.T) {
	m := loadManifests(t)
	pod := m.deploy.Spec.Template
	if *m.deploy.Spec.Replicas < 2 {
		t.Errorf("%d replicas: a ring needs several", *m.deploy.Spec.Replicas)
	}
	c := pod.Spec.Containers[0]
	args := c.Args
	port := func(name string) int32 {
		for _, p := range c.Ports {
			if p.Name == name {
				return p.ContainerPort
			}
		}
		t.Fatalf("container has no port %q", name)
		return 0
	}
	ns := m.ns.Name
	for _, svc := range []*corev1.Service{&m.ring, &m.http, &m.engine} {
		if svc.Namespace != ns {
			t.Errorf("Service %s in namespace %q, want %q", svc.Name, svc.Namespace, ns)
		}
	}
	for _, svc := range []*corev1.Service{&m.ring, &m.http} {
		for k, v := range svc.Spec.Selector {
			if pod.Labels[k] != v {
				t.Errorf("Service %s selects %s=%s, the pods are labelled %v", svc.Name, k, v, pod.Labels)
			}
		}
	}
	if m.ring.Spec.ClusterIP != corev1.ClusterIPNone || !m.ring.Spec.PublishNotReadyAddresses {
		t.Errorf("ring Service: clusterIP %q, publishNotReadyAddresses %v; want a headless Service that lists starting replicas",
			m.ring.Spec.ClusterIP, m.ring.Spec.PublishNotReadyAddresses)
	}
	wantPeers := m.ring.Name + "." + ns + ".svc.cluster.local:" + strconv.Itoa(int(m.ring.Spec.Ports[0].Port))
	if got := flagValue(args, "peers"); got != wantPeers {
		t.Errorf("--peers %q, want the ring Service %q", got, wantPeers)
	}
	if got := flagValue(args, "ring-listen"); !strings.HasSuffix(got, ":"+strconv.Itoa(int(port("ring")))) {
		t.Errorf("--ring-listen %q is not the container's ring port %d", got, port("ring"))
	}
	if m.engine.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("engines Service is not headless: %q", m.engine.Spec.ClusterIP)
	}
	wantDNS := m.engine.Name + "." + ns + ".svc.cluster.local:" + strconv.Itoa(int(m.engine.Spec.Ports[0].Port))
	if got := flagValue(args, "engine-dns"); got != wantDNS {
		t.Errorf("--engine-dns %q, want the engines Service %q", got, wantDNS)
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/ready" || p.HTTPGet.Port.String() != "http" {
		t.Errorf("readiness probe %+v, want GET /ready on the http port", p)
	}
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		t.Fatal("no preStop pause before the drain")
	}
	drain, err := time.ParseDuration(flagValue(args, "drain-timeout"))
	if err != nil {
		t.Fatalf("--drain-timeout: %v", err)
	}
	if grace := time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second; grace <= drain+time.Duration(c.Lifecycle.PreStop.Sleep.Seconds)*time.Second {
		t.Errorf("terminationGracePeriodSeconds %v does not cover preStop %ds + --drain-timeout %v", grace, c.Lifecycle.PreStop.Sleep.Seconds, drain)
	}
	// Secrets: files under a mount of the Secret, keys that it has.
	var mount *corev1.VolumeMount
	for i := range c.VolumeMounts {
		for _, v := range pod.Spec.Volumes {
			if v.Name == c.VolumeMounts[i].Name && v.Secret != nil && v.Secret.SecretName == m.secret.Name {
				mount = &c.VolumeMounts[i]
			}
		}
	}
	if mount == nil {
		t.Fatalf("no volume of Secret %s is mounted", m.secret.Name)
	}
	for _, f := range []string{"ring-secret-file", "admin-token-file"} {
		dir, key := filepath.Split(flagValue(args, f))
		if filepath.Clean(dir) != mount.MountPath || m.secret.StringData[key] == "" {
			t.Errorf("--%s %q is not a key of Secret %s mounted at %s", f, flagValue(args, f), m.secret.Name, mount.MountPath)
		}
	}
	if m.pdb.Spec.Selector == nil || m.pdb.Spec.MaxUnavailable == nil {
		t.Fatal("PodDisruptionBudget without a selector or maxUnavailable")
	}
	for k, v := range m.pdb.Spec.Selector.MatchLabels {
		if pod.Labels[k] != v {
			t.Errorf("PodDisruptionBudget selects %s=%s, the pods are labelled %v", k, v, pod.Labels)
		}
	}
}

// TestManifestsRefuseUnknownFields: the strict decoding the manifests pass
// does refuse a misspelt field.
func TestManifestsRefuseUnknownFields(t *testing.T) {
	for name, doc := range map[string]string{
		"another case": "spec:\n  clusterIp: None\n",
		"unknown":      "spec:\n  clusterIPs: [None]\n  headless: true\n",
		"duplicate":    "spec:\n  clusterIP: None\n  clusterIP: None\n",
	} {
		var svc corev1.Service
		if err := unmarshalStrict([]byte("apiVersion: v1\nkind: Service\n"+doc), &svc); err == nil {
			t.Errorf("a field %s decoded: %+v", name, svc.Spec)
		}
	}
	var svc corev1.Service
	if err := unmarshalStrict([]byte("apiVersion: v1\nkind: Service\nspec:\n  clusterIP: None\n"), &svc); err != nil || svc.Spec.ClusterIP != "None" {
		t.Fatalf("a good Service: %v %+v", err, svc.Spec)
	}
}

// TestKustomization lists every manifest, and only files that exist.
func TestKustomization(t *testing.T) {
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
	}
	decodeStrict(t, "kubernetes/kustomization.yaml", &k)
	files, _ := filepath.Glob("kubernetes/*.yaml")
	var want []string
	for _, f := range files {
		if b := filepath.Base(f); b != "kustomization.yaml" {
			want = append(want, b)
		}
	}
	got := slices.Sorted(slices.Values(k.Resources))
	if !slices.Equal(got, want) {
		t.Fatalf("kustomization lists %v, the directory has %v", got, want)
	}
}

// TestSystemdDropIns: the limits and sysctl drop-ins carry every setting
// of the README's tuning table at its suggested value.
func TestSystemdDropIns(t *testing.T) {
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	sysctl, _ := os.ReadFile("systemd/99-kvgate.conf")
	limits, _ := os.ReadFile("systemd/kvgate.service.d/limits.conf")
	unit, _ := os.ReadFile("systemd/kvgate.service")
	row := regexp.MustCompile("(?m)^\\| (`[^|]+`(?:, `[^|]+`)*)(?: \\([A-Za-z]+\\))? \\| [^|]+ \\| ([^|]+) \\|$")
	names := regexp.MustCompile("`([^`]+)`")
	rows := row.FindAllStringSubmatch(string(readme), -1)
	if len(rows) < 4 {
		t.Fatalf("found %d rows of the README's tuning table", len(rows))
	}
	for _, r := range rows {
		suggested := strings.Trim(strings.TrimSpace(r[2]), "`")
		for _, n := range names.FindAllStringSubmatch(r[1], -1) {
			name := n[1]
			switch {
			case name == "ulimit -n":
				if !strings.Contains(string(limits), "LimitNOFILE="+suggested) {
					t.Errorf("limits.conf lacks LimitNOFILE=%s", suggested)
				}
			case strings.HasPrefix(name, "net."):
				want := strings.Fields(strings.TrimSuffix(suggested, " or more"))
				line := regexp.MustCompile("(?m)^" + regexp.QuoteMeta(name) + " = (.+)$").FindStringSubmatch(string(sysctl))
				if line == nil || !slices.Equal(strings.Fields(line[1]), want) {
					t.Errorf("99-kvgate.conf: %s = %v, want %v", name, line, want)
				}
			}
		}
	}
	if !strings.Contains(string(unit), "ExecStart=/usr/local/bin/kvgate --config /etc/kvgate/kvgate.conf") {
		t.Error("the unit does not start kvgate with its config file")
	}
	if !strings.Contains(string(unit), "ExecReload=/bin/kill -HUP $MAINPID") {
		t.Error("the unit's reload does not send kvgate SIGHUP")
	}
}

// TestPromtoolCheckRules runs promtool on the alert rules; without
// promtool it skips, unless KVGATE_REQUIRE_PROMTOOL=1 (CI) makes that a
// failure.
func TestPromtoolCheckRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("KVGATE_REQUIRE_PROMTOOL") == "1" {
			t.Fatal("promtool not found and KVGATE_REQUIRE_PROMTOOL=1 (Debian: apt-get install prometheus)")
		}
		t.Skip("promtool not found (Debian's prometheus package has it)")
	}
	out, err := exec.Command(promtool, "check", "rules", "prometheus/kvgate-rules.yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
}

// TestGrafanaDashboard: the dashboard is JSON with unique panel ids, each
// panel querying kvgate metrics.
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile("grafana/kvgate-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string `json:"uid"`
		Panels []struct {
			ID      int    `json:"id"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("dashboard uid %q with %d panels", d.UID, len(d.Panels))
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			if !strings.Contains(q.Expr, "kvgate_") {
				t.Errorf("panel %q queries %q, no kvgate metric", p.Title, q.Expr)
			}
		}
	}
}
