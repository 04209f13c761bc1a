package tokenize

import (
	"testing"
	"time"
)

// TestStrftime: strftime_now formats as Python's datetime.strftime does
// (the expected strings are Python 3's, glibc's C locale, for naive times).
func TestStrftime(t *testing.T) {
	formats := []string{"%Y-%m-%d", "%d %b %Y", "%A, %B %-d, %Y at %I:%M %p",
		"day 1 of %y: %j %e %w %a %h %H:%M:%S.%f %z%Z %% %Q %", "%-m/%-d/%Y %-H:%-M"}
	for _, c := range []struct {
		at   time.Time
		want []string
	}{
		{time.Date(2026, 12, 1, 9, 30, 5, 123456000, time.UTC), []string{"2026-12-01", "01 Dec 2026",
			"Tuesday, December 1, 2026 at 09:30 AM", "day 1 of 26: 335  1 2 Tue Dec 09:30:05.123456  % %Q %", "12/1/2026 9:30"}},
		{time.Date(2025, 1, 9, 0, 5, 0, 0, time.UTC), []string{"2025-01-09", "09 Jan 2025",
			"Thursday, January 9, 2025 at 12:05 AM", "day 1 of 25: 009  9 4 Thu Jan 00:05:00.000000  % %Q %", "1/9/2025 0:5"}},
		{time.Date(2024, 7, 4, 12, 0, 0, 0, time.UTC), []string{"2024-07-04", "04 Jul 2024",
			"Thursday, July 4, 2024 at 12:00 PM", "day 1 of 24: 186  4 4 Thu Jul 12:00:00.000000  % %Q %", "7/4/2024 12:0"}},
		{time.Date(2024, 2, 29, 23, 59, 59, 0, time.UTC), []string{"2024-02-29", "29 Feb 2024",
			"Thursday, February 29, 2024 at 11:59 PM", "day 1 of 24: 060 29 4 Thu Feb 23:59:59.000000  % %Q %", "2/29/2024 23:59"}},
	} {
		for i, f := range formats {
			if got := string(appendStrftime(nil, c.at, f)); got != c.want[i] {
				t.Errorf("%v %q: got %q, want %q", c.at, f, got, c.want[i])
			}
		}
	}
	ct, err := NewChatTemplate(`{{ strftime_now("%d %B %Y") }}|{{ strftime_now() }}`, "", "")
	if err != nil {
		t.Fatal(err)
	}
	ct.clock = chatGoldenClock
	if got, err := ct.Render(&ChatInput{Messages: []byte(`[]`)}); err != nil || got != "01 December 2026|2026-12-01" {
		t.Fatalf("rendered %q, %v", got, err)
	}
}
