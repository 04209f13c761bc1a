package httpx

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/panjf2000/gnet/v2/pkg/logging"
)

// gnetLogger routes gnet's own log lines into the server's slog logger, so
// the daemon writes one structured log (component "gnet").
type gnetLogger struct{ l *slog.Logger }

var _ logging.Logger = gnetLogger{}

func (g gnetLogger) log(level slog.Level, format string, args []any) {
	if g.l.Enabled(context.Background(), level) {
		g.l.Log(context.Background(), level, fmt.Sprintf(format, args...), "component", "gnet")
	}
}

func (g gnetLogger) Debugf(format string, args ...any) { g.log(slog.LevelDebug, format, args) }
func (g gnetLogger) Infof(format string, args ...any)  { g.log(slog.LevelInfo, format, args) }
func (g gnetLogger) Warnf(format string, args ...any)  { g.log(slog.LevelWarn, format, args) }
func (g gnetLogger) Errorf(format string, args ...any) { g.log(slog.LevelError, format, args) }

// Fatalf logs at error level; gnet calls it where it gives up, and the
// server's Serve returns that error, so the process is not ended here.
func (g gnetLogger) Fatalf(format string, args ...any) { g.log(slog.LevelError, format, args) }

// GnetLogger is gnet's logger routed into l, for other gnet servers of the
// process (perf/floor's).
func GnetLogger(l *slog.Logger) logging.Logger { return gnetLogger{l} }
