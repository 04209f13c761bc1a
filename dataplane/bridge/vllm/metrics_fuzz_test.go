package vllm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/kvgate/kvgate/dataplane/bridge/bridgeutil"
)

// The expositions in testdata/metrics are /metrics as the engines write it
// with prometheus_client: vLLM v1 with two data-parallel ranks and vLLM v0
// (metric names, HELP text and label sets from vllm-project/vllm
// vllm/v1/metrics/loggers.py at 005a810bc40faa25b8870fbc8559c3462581eee3:
// labels model_name and engine, vllm:cache_config_info's labels the
// CacheConfig fields, sorted as prometheus_client writes them, histograms
// as _bucket/_count/_sum), and SGLang (names, HELP text and labels from
// sgl-project/sglang python/sglang/srt/observability/metrics_collector.py
// and scheduler_metrics_mixin.py at 44cedc2b9c7dd31d9acae4498ea4fa0d3665feed;
// the priority label of the tokenizer's metrics from its
// RequestMetricsRecorder).
var metricsExpositions = []struct {
	file string
	want map[int]EngineMetrics
}{
	{"vllm-v1-dp2.txt", map[int]EngineMetrics{
		0: {Running: 7, Waiting: 2, KVUsage: 0.4187, GPUBlocks: 27386},
		1: {Running: 5, Waiting: 0, KVUsage: 0.2503, GPUBlocks: 27412},
	}},
	{"vllm-v0.txt", map[int]EngineMetrics{0: {Running: 3, Waiting: 1, KVUsage: 0.0731, GPUBlocks: 8940, MaxLoRAs: 1}}}, // its vllm:lora_requests_info says max_lora="1"
	{"sglang.txt", map[int]EngineMetrics{0: {Running: 4, Waiting: 6, KVUsage: 0.61, GPUTokens: 144870}}},
	// Two DP-attention ranks of two TP ranks each, every scheduler
	// exporting: each rank's figures are its first TP rank's (0 and 2),
	// whichever comes first (see metrics.go).
	{"sglang-dp2-tp4.txt", map[int]EngineMetrics{
		0: {Running: 5, Waiting: 2, KVUsage: 0.5, GPUTokens: 81920},
		1: {Running: 3, Waiting: 0, KVUsage: 0.25, GPUTokens: 81920},
	}},
	// Pipeline stage 1's series do not count.
	{"sglang-pp2.txt", map[int]EngineMetrics{0: {Running: 2, KVUsage: 0.1, GPUTokens: 4096}}},
}

func readExposition(tb testing.TB, file string) []byte {
	tb.Helper()
	b, err := os.ReadFile("testdata/metrics/" + file)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestParseMetricsExpositions: each engine's real exposition reads as the
// per-rank figures it states.
func TestParseMetricsExpositions(t *testing.T) {
	for _, c := range metricsExpositions {
		t.Run(c.file, func(t *testing.T) {
			m, err := parseMetrics(bytes.NewReader(readExposition(t, c.file)))
			if err != nil {
				t.Fatal(err)
			}
			if got := flatMetrics(m); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

// FuzzParseMetrics feeds an engine's /metrics text, arbitrary or cut short,
// with one well-formed sample appended (a rank and a value of the fuzzer's
// choosing). An engine's text may be anything; what the parser owes is:
// an error only for a line over its limit; the same result however the
// body arrives in reads; garbage before a sample never changes what the
// sample says; a result that survives being written out as an exposition
// and read back; and LOAD reports within bounds whatever the values.
func FuzzParseMetrics(f *testing.F) {
	for _, c := range metricsExpositions {
		text := readExposition(f, c.file)
		f.Add(text, uint8(0), 3.0)
		f.Add(text[:len(text)/2], uint8(1), 0.5) // a scrape cut mid-line
	}
	f.Add([]byte("vllm:num_requests_running{engine=\"0\",model_name=\"m\"} NaN\nvllm:kv_cache_usage_perc{engine=\"0\"} +Inf\n"), uint8(0), math.Inf(-1))
	f.Add([]byte("vllm:num_requests_waiting{engine=\"1\",model_name=\"a\\\"b,c=}\"} -1\n"), uint8(2), 1e300)
	f.Add([]byte("vllm:cache_config_info{block_size=\"16\",engine=\"0\",kv_offloading_backend=\"lmcache\",kv_offloading_size=\"8.0\",num_gpu_blocks=\"100\"} 1.0\n"+
		"lmcache:local_cache_usage{model_name=\"m\",worker_id=\"0\"} 1.5e9\nlmcache:local_cache_usage{model_name=\"m\",worker_id=\"1\"} 2.5e9\n"+
		"lmcache:local_storage_usage{model_name=\"m\",worker_id=\"0\"} 3e9\n"), uint8(0), 1.0)
	f.Fuzz(func(t *testing.T, text []byte, rank uint8, value float64) {
		m, err := parseMetrics(bytes.NewReader(text))
		if err != nil {
			if !errors.Is(err, bufio.ErrTooLong) {
				t.Fatalf("error %v", err)
			}
			return
		}
		again, err := parseMetrics(iotest.HalfReader(bytes.NewReader(text)))
		if err != nil || !equalMetrics(again, m) {
			t.Fatalf("read in halves: %v, %+v; whole: %+v", err, flatMetrics(again), flatMetrics(m))
		}

		sample := fmt.Sprintf("\nvllm:num_requests_waiting{engine=\"%d\",model_name=\"Qwen/Qwen3-8B\"} %s\n", rank, promFloat(value))
		withSample, err := parseMetrics(bytes.NewReader(append(text[:len(text):len(text)], sample...)))
		if err != nil {
			t.Fatal(err)
		}
		if got := withSample[int(rank)]; got == nil || !sameFloat(got.Waiting, value) {
			t.Fatalf("appended sample of rank %d says %v; parsed %+v", rank, value, got)
		}

		rendered := renderMetrics(m)
		back, err := parseMetrics(strings.NewReader(rendered))
		if err != nil || !equalMetrics(back, m) {
			t.Fatalf("written out and read back: %v\n%s\ngot  %+v\nwant %+v", err, rendered, flatMetrics(back), flatMetrics(m))
		}

		for _, l := range Loads(withSample, int(rank)+1, 1000, 16) {
			for _, tier := range l.Tiers {
				if tier.Used > tier.Total {
					t.Fatalf("rank %d: %d of %d blocks used", l.DPRank, tier.Used, tier.Total)
				}
			}
		}
		if l := Loads(withSample, int(rank)+1, 1000, 16)[rank]; l.Waiting != bridgeutil.Count(value) {
			t.Fatalf("%v waiting reported as %d", value, l.Waiting)
		}
	})
}

// TestLoadsClampsGauges: values no sane engine reports still give LOAD
// figures within their types, the same on every platform.
func TestLoadsClampsGauges(t *testing.T) {
	for _, c := range []struct {
		in      EngineMetrics
		running uint32
		used    uint64
	}{
		{EngineMetrics{Running: -1, KVUsage: -0.5}, 0, 0},
		{EngineMetrics{Running: math.NaN(), KVUsage: math.NaN()}, 0, 0},
		{EngineMetrics{Running: 1e12, KVUsage: 1.5}, math.MaxUint32, 100},
		{EngineMetrics{Running: 7.9, KVUsage: 0.25}, 7, 25},
	} {
		l := Loads(map[int]*EngineMetrics{0: &c.in}, 1, 100, 0)[0]
		if l.Running != c.running || l.Tiers[0].Used != c.used {
			t.Errorf("%+v: running %d used %d, want %d and %d", c.in, l.Running, l.Tiers[0].Used, c.running, c.used)
		}
	}
}

// flatMetrics copies the parsed map by value, for comparing.
func flatMetrics(m map[int]*EngineMetrics) map[int]EngineMetrics {
	out := make(map[int]EngineMetrics, len(m))
	for r, em := range m {
		out[r] = *em
	}
	return out
}

// equalMetrics compares parsed metrics, a NaN equal to a NaN.
func equalMetrics(a, b map[int]*EngineMetrics) bool {
	if len(a) != len(b) {
		return false
	}
	for r, x := range a {
		y := b[r]
		if y == nil || !sameFloat(x.Running, y.Running) || !sameFloat(x.Waiting, y.Waiting) ||
			!sameFloat(x.KVUsage, y.KVUsage) || x.GPUBlocks != y.GPUBlocks || x.GPUTokens != y.GPUTokens ||
			x.OffloadGiB != y.OffloadGiB || x.OffloadBackend != y.OffloadBackend || x.HasLMCache != y.HasLMCache ||
			x.LMCacheCPUBytes != y.LMCacheCPUBytes || x.LMCacheDiskBytes != y.LMCacheDiskBytes || x.MaxLoRAs != y.MaxLoRAs {
			return false
		}
	}
	return true
}

// renderMetrics writes parsed metrics out as vLLM would expose them.
func renderMetrics(m map[int]*EngineMetrics) string {
	ranks := make([]int, 0, len(m))
	for r := range m {
		ranks = append(ranks, r)
	}
	sort.Ints(ranks)
	var b strings.Builder
	for _, r := range ranks {
		em := m[r]
		fmt.Fprintf(&b, "vllm:num_requests_running{engine=\"%d\",model_name=\"m\"} %s\n", r, promFloat(em.Running))
		fmt.Fprintf(&b, "vllm:num_requests_waiting{engine=\"%d\",model_name=\"m\"} %s\n", r, promFloat(em.Waiting))
		fmt.Fprintf(&b, "vllm:kv_cache_usage_perc{engine=\"%d\",model_name=\"m\"} %s\n", r, promFloat(em.KVUsage))
		size := "None"
		if em.OffloadGiB > 0 {
			size = strconv.FormatFloat(em.OffloadGiB, 'g', -1, 64)
		}
		fmt.Fprintf(&b, "vllm:cache_config_info{block_size=\"16\",engine=\"%d\",kv_offloading_backend=\"%s\",kv_offloading_size=\"%s\",num_gpu_blocks=\"%d\"} 1.0\n",
			r, labelEscaper.Replace(em.OffloadBackend), size, em.GPUBlocks)
		if em.MaxLoRAs > 0 {
			fmt.Fprintf(&b, "vllm:lora_requests_info{engine=\"%d\",max_lora=\"%d\",running_lora_adapters=\"\",waiting_lora_adapters=\"\"} 1.7e9\n", r, em.MaxLoRAs)
		}
		if em.HasLMCache {
			fmt.Fprintf(&b, "lmcache:local_cache_usage{engine=\"%d\",worker_id=\"0\"} %s\n", r, promFloat(em.LMCacheCPUBytes))
			fmt.Fprintf(&b, "lmcache:local_storage_usage{engine=\"%d\",worker_id=\"0\"} %s\n", r, promFloat(em.LMCacheDiskBytes))
		}
		if em.GPUTokens > 0 {
			fmt.Fprintf(&b, "sglang:max_total_num_tokens{engine=\"%d\"} %d\n", r, em.GPUTokens)
		}
	}
	return b.String()
}

// labelEscaper escapes a label value as the exposition format does.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// promFloat formats a sample value as the exposition format spells it.
func promFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func sameFloat(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }
