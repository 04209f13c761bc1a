package tokenize

import (
	"fmt"
	"strconv"
	"time"

	"github.com/ardanlabs/jinja"
)

// strftimeNow is the template function strftime_now(format) that
// transformers gives chat templates: datetime.now().strftime(format), the
// local time without a zone (Llama 3.x and gpt-oss print today's date
// with it). It replaces the Jinja engine's own, which turns the format
// into a Go layout and so misprints literal digits ("day 1" would print
// the month) and knows only a few directives. clock is time.Now but in
// tests.
func strftimeNow(clock func() time.Time) jinja.Value {
	return jinja.NewCallable("strftime_now", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		format := "%Y-%m-%d"
		if len(args) > 0 && args[0].IsString() {
			format = args[0].AsString()
		} else if len(args) > 0 {
			return jinja.Undefined(), fmt.Errorf("strftime_now: the format is not a string")
		}
		return jinja.NewString(string(appendStrftime(nil, clock(), format))), nil
	})
}

var (
	longDays   = [...]string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}
	longMonths = [...]string{"January", "February", "March", "April", "May", "June", "July", "August",
		"September", "October", "November", "December"}
)

// appendStrftime formats t as C's strftime does in the C locale (which
// Python's calls), for a time without a zone: %z and %Z print nothing.
// glibc's "-" flag (%-d: no padding) is honoured; an unknown directive is
// printed as written, as glibc does.
func appendStrftime(b []byte, t time.Time, format string) []byte {
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			b = append(b, c)
			continue
		}
		start := i
		i++
		pad := true
		if format[i] == '-' && i+1 < len(format) {
			pad = false
			i++
		}
		num := func(v, width int) []byte {
			s := strconv.Itoa(v)
			for pad && len(s) < width {
				s = "0" + s
			}
			return append(b, s...)
		}
		hour12 := t.Hour() % 12
		if hour12 == 0 {
			hour12 = 12
		}
		switch format[i] {
		case 'Y':
			b = strconv.AppendInt(b, int64(t.Year()), 10)
		case 'y':
			b = num(t.Year()%100, 2)
		case 'm':
			b = num(int(t.Month()), 2)
		case 'd':
			b = num(t.Day(), 2)
		case 'e':
			if s := strconv.Itoa(t.Day()); pad && len(s) < 2 {
				b = append(b, ' ')
			}
			b = strconv.AppendInt(b, int64(t.Day()), 10)
		case 'H':
			b = num(t.Hour(), 2)
		case 'I':
			b = num(hour12, 2)
		case 'M':
			b = num(t.Minute(), 2)
		case 'S':
			b = num(t.Second(), 2)
		case 'f':
			b = num(t.Nanosecond()/1000, 6)
		case 'j':
			b = num(t.YearDay(), 3)
		case 'p':
			b = append(b, map[bool]string{false: "AM", true: "PM"}[t.Hour() >= 12]...)
		case 'A':
			b = append(b, longDays[t.Weekday()]...)
		case 'a':
			b = append(b, longDays[t.Weekday()][:3]...)
		case 'B':
			b = append(b, longMonths[t.Month()-1]...)
		case 'b', 'h':
			b = append(b, longMonths[t.Month()-1][:3]...)
		case 'w':
			b = strconv.AppendInt(b, int64(t.Weekday()), 10)
		case 'z', 'Z':
		case '%':
			b = append(b, '%')
		default:
			b = append(b, format[start:i+1]...)
		}
	}
	return b
}
