package api

import (
	"encoding/json"
	"os"
	"syscall"
	"testing"
	"time"
)

// turn20 is the body of turn 20 of the 20-turn conversation that
// dataplane/tokenize's BenchmarkChatTurn20 renders (its last chat case:
// 40 messages, 17 KB), as a chat completion.
func turn20(b *testing.B) []byte {
	raw, err := os.ReadFile("../tokenize/testdata/chat_cases.json")
	if err != nil {
		b.Fatal(err)
	}
	var cases []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &cases); err != nil {
		b.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"model": "Qwen/Qwen3-8B", "messages": cases[len(cases)-1]["messages"], "max_tokens": 64})
	return body
}

// BenchmarkDecodeChatTurn20: what the router's decoding costs turn 20
// before the template: DecodeChat whole, and normalizeMessages alone.
func BenchmarkDecodeChatTurn20(b *testing.B) {
	body := turn20(b)
	var chat chatBody
	if e := chat.decode(body); e != nil {
		b.Fatal(e)
	}
	b.Run("decode-chat", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		cpu := processCPU()
		for b.Loop() {
			if _, e := DecodeChat(body, nil); e != nil {
				b.Fatal(e)
			}
		}
		reportCPU(b, cpu)
	})
	b.Run("normalize-messages", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(chat.Messages)))
		cpu := processCPU()
		for b.Loop() {
			if _, err := normalizeMessages(chat.Messages, &imageSink{}); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b, cpu)
	})
	b.Run("normalize-messages/encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(chat.Messages)))
		cpu := processCPU()
		for b.Loop() {
			if _, err := normalizeJSON(chat.Messages, &imageSink{}); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b, cpu)
	})
}

// processCPU is the process's CPU time (user and system, all threads),
// which a busy shared machine inflates far less than wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU adds cpu-ns/op: the CPU time since start over b.N.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
}
