package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func parseMedia(args ...string) (*mediaFlags, error) {
	fs := flag.NewFlagSet("kvgate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := &mediaFlags{}
	f.register(fs)
	return f, fs.Parse(args)
}

func TestMediaFlags(t *testing.T) {
	f, err := parseMedia("--media-allow-host", "img.example", "--media-allow-host", "10.0.0.7", "--media-max-bytes", "1000",
		"--media-fetch-timeout", "3s", "--media-allow-private", "--media-processor", "Qwen/Qwen2.5-VL-7B-Instruct=qwen2.5-vl,max-pixels=12845056",
		"--media-processor", "meta-llama/Llama-4-Scout=llama4,max-tiles=8", "--media-processor", "google/gemma-3-4b-it=gemma3")
	if err != nil {
		t.Fatal(err)
	}
	m := f.gateway()
	o := m.Resolver.Fetcher.Options()
	if len(o.AllowHosts) != 2 || o.MaxBytes != 1000 || o.Timeout != 3*time.Second || !o.AllowPrivate || m.Resolver.MaxBytes != 1000 {
		t.Fatalf("fetch options %+v", o)
	}
	if len(m.Processors) != 3 || m.Processors["Qwen/Qwen2.5-VL-7B-Instruct"].Name() != "qwen2.5-vl" {
		t.Fatalf("processors %v", m.Processors)
	}
	e, _ := m.Processors["Qwen/Qwen2.5-VL-7B-Instruct"].Expand(4000, 3000)
	if e.Tokens() != 15301 { // max-pixels applied: 107 x 143 merged patches
		t.Fatalf("max-pixels not applied: %d tokens", e.Tokens())
	}
	if off, _ := parseMedia(); off.gateway().Resolver.Fetcher != nil {
		t.Fatal("fetching on without --media-allow-host")
	}
}

func TestMediaProcessorFromFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "preprocessor_config.json")
	cfg := `{"size":{"longest_edge":16777216,"shortest_edge":65536},"patch_size":16,"merge_size":2,"image_processor_type":"Qwen2VLImageProcessorFast","processor_class":"Qwen3VLProcessor"}`
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := parseMedia("--media-processor", "Qwen/Qwen3-VL-8B-Instruct=@"+file)
	if err != nil {
		t.Fatal(err)
	}
	if p := f.gateway().Processors["Qwen/Qwen3-VL-8B-Instruct"]; p == nil || p.Name() != "qwen3-vl" {
		t.Fatalf("processor %v", p)
	}
	for _, args := range [][]string{{"--media-processor", "m=@" + file + ",max-pixels=4"}, {"--media-processor", "m=@/nonexistent/preprocessor_config.json"}} {
		if _, err := parseMedia(args...); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

func TestMediaFlagsRefuse(t *testing.T) {
	for _, args := range [][]string{
		{"--media-allow-host", "https://img.example"},
		{"--media-allow-host", "img.example:443"},
		{"--media-max-bytes", "0"},
		{"--media-fetch-timeout", "-1s"},
		{"--media-processor", "m=llava"},
		{"--media-processor", "m"},
		{"--media-processor", "m=qwen2-vl,max-tiles=4"},
		{"--media-processor", "m=qwen2-vl,pixels=4"},
		{"--media-processor", "m=gemma3", "--media-processor", "m=llama4"},
	} {
		if _, err := parseMedia(args...); err == nil {
			t.Errorf("%s accepted", strings.Join(args, " "))
		}
	}
}
