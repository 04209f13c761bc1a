package engine

import (
	"bytes"
	"log/slog"

	"github.com/cloudwego/netpoll"
)

// ConfigureNetpoll sends cloudwego/netpoll's log lines, which it writes
// with a process-wide standard logger of its own, to log at warn level
// (component "netpoll"), so the daemon writes one structured log, and
// runs pollers pollers (0: netpoll's default, counted from GOMAXPROCS
// when the process started). Its other settings keep their defaults.
func ConfigureNetpoll(log *slog.Logger, pollers int) error {
	return netpoll.Configure(netpoll.Config{LoggerOutput: slogLines{log}, LoadBalance: netpoll.RoundRobin, PollerNum: pollers})
}

// slogLines is an io.Writer that logs each line it is given.
type slogLines struct{ l *slog.Logger }

func (w slogLines) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		// log.LstdFlags' "2006/01/02 15:04:05 " prefix: slog stamps its own.
		if len(line) > 20 && line[4] == '/' && line[7] == '/' && line[13] == ':' {
			line = line[20:]
		}
		w.l.Warn(string(line), "component", "netpoll")
	}
	return len(p), nil
}
