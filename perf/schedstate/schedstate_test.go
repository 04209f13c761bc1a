package schedstate

import (
	"bytes"
	"runtime"
	"runtime/trace"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRead traces three known phases of this process and checks that Read
// puts each in its state: a goroutine in epoll_wait (a poller's wait), one
// in nanosleep (another system call), and two goroutines spinning on one P
// (one running, the other runnable). Each bound is a lower one that the
// phase guarantees however loaded the machine is: a system call with a
// 100 ms timeout lasts at least that, and two goroutines sharing one P
// leave one runnable until the first is done.
func TestRead(t *testing.T) {
	if trace.IsEnabled() {
		t.Skip("a trace is already running")
	}
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Fatal(err)
	}
	func() {
		defer trace.Stop()
		epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(epfd)
		run(func() {
			events := make([]unix.EpollEvent, 1)
			_, _ = unix.EpollWait(epfd, events, 100) // nothing registered: it times out
		})
		run(func() {
			ts := syscall.NsecToTimespec(int64(100 * time.Millisecond))
			for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
			}
		})
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
		spin := func() {
			for t0 := time.Now(); time.Since(t0) < 50*time.Millisecond; {
			}
		}
		run(spin, spin)
	}()
	s, err := Read(&buf, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(s)
	var detail strings.Builder
	s.Detail(&detail, 0)
	t.Log(detail.String())
	at := func(mean float64) time.Duration { return time.Duration(mean * float64(s.Duration)) }
	if got := at(s.PollWait); got < 95*time.Millisecond {
		t.Errorf("poller wait %v, want at least the epoll_wait's 100 ms timeout", got)
	}
	if s.PollHeld <= 0 || s.PollHeld > s.PollWait {
		t.Errorf("Ps held by poller waits %.3f, want above 0 (a system call starts on its P) and at most the waits' %.3f", s.PollHeld, s.PollWait)
	}
	held := 0.0
	for k, v := range s.HeldBy {
		held += v
		if !strings.Contains(k, "schedstate.TestRead") {
			t.Errorf("a P held by a poller wait called from %q; the only wait is this test's", k)
		}
	}
	if d := held - s.PollHeld; d > 1e-9 || d < -1e-9 {
		t.Errorf("HeldBy sums to %.4f, PollHeld is %.4f", held, s.PollHeld)
	}
	if got := at(s.Syscall); got < 95*time.Millisecond {
		t.Errorf("other system calls %v, want at least the nanosleep's 100 ms", got)
	}
	if got := at(s.Runnable); got < 40*time.Millisecond {
		t.Errorf("runnable %v, want about 50 ms: two spinners on one P", got)
	}
	if s.WaitedOnPoller > 0.5 {
		t.Errorf("runnable work while a poller waits %.2f of the time; the epoll_wait phase had nothing else to run", s.WaitedOnPoller)
	}
	if !strings.Contains(s.String(), "poller waits") {
		t.Errorf("String: %s", s)
	}
}

// run runs fs on goroutines of their own and waits for them.
func run(fs ...func()) {
	var wg sync.WaitGroup
	for _, f := range fs {
		wg.Go(f)
	}
	wg.Wait()
}

// TestReadRefusesGarbage: bytes that are not a trace are an error, not a
// summary of nothing.
func TestReadRefusesGarbage(t *testing.T) {
	if _, err := Read(strings.NewReader("not a trace"), 2); err == nil {
		t.Fatal("no error for bytes that are not a trace")
	}
	if _, err := Read(strings.NewReader(""), 2); err == nil {
		t.Fatal("no error for an empty input")
	}
}
