package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The client under test runs as a child process, this same binary started
// with childCommand as its first argument, so that its CPU time and peak
// RSS are its own. It talks to the parent over its stdin and stdout, one
// line each way: "usage" asks for its resource usage so far; the end of
// stdin makes it exit.
const childCommand = "__loadtest_client"

// Client implementations a child can run.
const (
	implGoxds = "goxds"   // goxds client + config-tree watcher (with -channel: a grpcxds channel)
	implGRPC  = "grpc-go" // grpc-go's xDS resolver, without a channel (with -channel: its channel)
	// implBare (bare.go) decodes and ACKs, the reference a client is
	// compared with.
)

// usage is a child's resource usage.
type usage struct {
	cpu    time.Duration // user + system; since the client started, except from stop
	maxRSS int64         // bytes
	// info is what the client says of its own state (snapshots seen,
	// clusters in error), for the log.
	info string
	at   time.Time // when the parent had the answer
}

// selfUsage returns the CPU time (getrusage) and the peak RSS of this
// process. The peak comes from /proc/self/status (VmHWM), not from
// getrusage: Linux keeps in ru_maxrss the high-water mark of the memory
// the process had before execve, which for a child started by os/exec
// (clone with CLONE_VM, then execve) is the parent's: every client would
// report at least the harness's own RSS. For the same reason the rusage of
// the exited process is not used for memory.
func selfUsage() (cpu time.Duration, maxRSS int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return rusageCPU(&ru), procStatusBytes("self", "VmHWM:")
}

func rusageCPU(ru *syscall.Rusage) time.Duration {
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// child is the parent's handle on a client process.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr *capped
	exited chan struct{} // closed when the process has exited
	mu     sync.Mutex    // one usage question at a time
	// killedAt is the RSS at which the watchdog killed the process, 0 if
	// it did not.
	killedAt atomic.Int64
	// lastBusy is when the last settle saw the child's last CPU use: the
	// end of its last 50 ms window with 1 ms or more. Read after settle,
	// on settle's goroutine.
	lastBusy time.Time
}

// startChild starts a client of impl that reads its bootstrap from
// GRPC_XDS_BOOTSTRAP_CONFIG.
func startChild(impl string, bootstrapJSON []byte, extraEnv []string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, childCommand, impl, listenerName)
	cmd.Env = append(os.Environ(), "GRPC_XDS_BOOTSTRAP_CONFIG="+string(bootstrapJSON), "GRPC_XDS_BOOTSTRAP=")
	cmd.Env = append(cmd.Env, extraEnv...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, stdin: stdin, stdout: bufio.NewReader(stdout), stderr: &capped{max: 64 << 10}, exited: make(chan struct{})}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		_ = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

// watchdog kills the child if its resident memory goes above limit: a
// client that queues work faster than it does it (grpc-go at 10,000
// clusters) can take all the memory of a shared machine.
func (c *child) watchdog(limit int64) {
	if limit <= 0 {
		return
	}
	go func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-c.exited:
				return
			case <-t.C:
				if rss := residentBytes(c.cmd.Process.Pid); rss > limit {
					c.killedAt.Store(rss)
					_ = c.cmd.Process.Kill()
					return
				}
			}
		}
	}()
}

// residentBytes reads a process's resident set size from /proc; 0 if it
// cannot.
func residentBytes(pid int) int64 { return procStatusBytes(strconv.Itoa(pid), "VmRSS:") }

// procStatusBytes reads a size field of /proc/<pid>/status; 0 if it
// cannot.
func procStatusBytes(pid, field string) int64 {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}

// usage asks the child for its resource usage so far.
func (c *child) usage() (usage, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := io.WriteString(c.stdin, "usage\n"); err != nil {
		return usage{}, fmt.Errorf("asking the client for its usage: %w (stderr: %s)", err, c.stderr)
	}
	line, err := c.stdout.ReadString('\n')
	if err != nil {
		return usage{}, fmt.Errorf("reading the client's usage: %w (stderr: %s)", err, c.stderr)
	}
	f := strings.SplitN(strings.TrimSpace(line), " ", 4)
	if len(f) < 3 || f[0] != "usage" {
		return usage{}, fmt.Errorf("client said %q", line)
	}
	cpu, err1 := strconv.ParseInt(f[1], 10, 64)
	rss, err2 := strconv.ParseInt(f[2], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return usage{}, fmt.Errorf("client said %q: %w", line, err)
	}
	u := usage{cpu: time.Duration(cpu), maxRSS: rss, at: time.Now()}
	if len(f) == 4 {
		u.info = f[3]
	}
	return u, nil
}

// probe asks a channel child for one RPC to the route of cluster i, and
// returns the address that served it and how long the RPC took.
func (c *child) probe(i int) (servedAt string, took time.Duration, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := fmt.Fprintf(c.stdin, "probe %d\n", i); err != nil {
		return "", 0, fmt.Errorf("asking the client for a probe: %w (stderr: %s)", err, c.stderr)
	}
	line, err := c.stdout.ReadString('\n')
	if err != nil {
		return "", 0, fmt.Errorf("reading the client's probe: %w (stderr: %s)", err, c.stderr)
	}
	f := strings.SplitN(strings.TrimSpace(line), " ", 4)
	switch {
	case len(f) == 4 && f[0] == "probe" && f[1] == "ok":
		ns, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			return "", 0, fmt.Errorf("client said %q: %w", line, err)
		}
		return f[2], time.Duration(ns), nil
	case len(f) >= 2 && f[0] == "probe" && f[1] == "error":
		return "", 0, fmt.Errorf("RPC to the route of %s: %s", clusterName(i), strings.TrimSpace(strings.TrimPrefix(line, "probe error")))
	}
	return "", 0, fmt.Errorf("client said %q", line)
}

// touch asks a channel child to start an RPC to the route of cluster i,
// without waiting for it: the RPC picks the cluster.
func (c *child) touch(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := fmt.Fprintf(c.stdin, "touch %d\n", i); err != nil {
		return fmt.Errorf("asking the client to call %s: %w (stderr: %s)", clusterName(i), err, c.stderr)
	}
	line, err := c.stdout.ReadString('\n')
	if err != nil {
		return fmt.Errorf("reading the client's answer: %w (stderr: %s)", err, c.stderr)
	}
	if strings.TrimSpace(line) != "touch ok" {
		return fmt.Errorf("client said %q", line)
	}
	return nil
}

// startProfile makes the child start its CPU profile now, if it was given
// one to write and told to wait (LOADTEST_CPUPROFILE_UPDATES).
func (c *child) startProfile() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := io.WriteString(c.stdin, "profile\n")
	return err
}

// settle waits until the child stops using CPU (less than 1 ms in each of
// three 50 ms windows in a row: on a loaded machine a busy process may get
// no CPU for 50 ms), or limit, and returns its usage then; capped tells the
// limit was reached.
func (c *child) settle(limit time.Duration, logf func(string, ...any)) (u usage, capped bool, err error) {
	start := time.Now()
	deadline, nextLog := start.Add(limit), start.Add(5*time.Second)
	prev, err := c.usage()
	if err != nil {
		return usage{}, false, err
	}
	quiet := 0
	c.lastBusy = start
	for time.Now().Before(deadline) {
		if time.Now().After(nextLog) {
			logf("    still busy after %v: CPU %v, peak RSS %s", time.Since(start).Round(time.Second), prev.cpu.Round(time.Millisecond), fmtBytes(prev.maxRSS))
			nextLog = nextLog.Add(5 * time.Second)
		}
		time.Sleep(50 * time.Millisecond)
		u, err := c.usage()
		if err != nil {
			return usage{}, false, err
		}
		if u.cpu-prev.cpu < time.Millisecond {
			quiet++
		} else {
			quiet = 0
			c.lastBusy = time.Now()
		}
		if quiet == 3 {
			return u, false, nil
		}
		prev = u
	}
	return prev, true, nil
}

// stop ends the child and returns its CPU time over its whole life.
func (c *child) stop() error {
	_ = c.stdin.Close()
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
	if ps := c.cmd.ProcessState; !ps.Success() {
		return fmt.Errorf("client process: %v (stderr: %s)", ps, c.stderr)
	}
	return nil
}

// capped is a goroutine-safe buffer that keeps the first max bytes.
type capped struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *capped) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *capped) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.TrimSpace(b.buf.String())
}

// stopProfile ends the child's CPU profile, if one runs.
var stopProfile = func() {}

// childMain is the client process: it starts the client of impl following
// listener and answers usage questions until stdin ends.
func childMain(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: loadtest", childCommand, "goxds|grpc-go|bare LISTENER")
		return 2
	}
	impl, listener := args[0], args[1]
	if os.Getenv("LOADTEST_MEMPROFILE") != "" {
		runtime.MemProfileRate = 1024 // finer than the default 512 KiB
	}
	// The CPU profile covers the whole run, or with
	// LOADTEST_CPUPROFILE_UPDATES from the parent's "profile" on: the
	// updates, without the resolving.
	profile := func() {}
	if path := os.Getenv("LOADTEST_CPUPROFILE"); path != "" {
		var once sync.Once
		profile = func() {
			once.Do(func() {
				stop, err := startCPUProfile(path)
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					return
				}
				stopProfile = stop
			})
		}
		if os.Getenv("LOADTEST_CPUPROFILE_UPDATES") == "" {
			profile()
		}
		defer func() { stopProfile() }()
	}
	// CPU is counted from here: the start of the process (the Go runtime,
	// and the init of every package of this binary, grpc-go's xds
	// included, the same for every client) is nobody's client's.
	base, _ := selfUsage()
	var (
		info  func() string
		stop  func()
		err   error
		probe = func(string, bool) string { return "error not a channel" }
	)
	channel := os.Getenv(envChannel) != ""
	var files uint64
	if channel {
		want, _ := strconv.ParseUint(os.Getenv(envFiles), 10, 64)
		files = raiseFileLimit(want)
	}
	switch {
	case impl == implGoxds && channel:
		info, probe, stop, err = runGoxdsChannel(listener, files, os.Getenv(envFirstRPC) != "")
	case impl == implGRPC && channel:
		info, probe, stop, err = runGRPCChannel(listener, files)
	case impl == implGoxds:
		info, stop, err = runGoxds(listener)
	case impl == implGRPC:
		info, stop, err = runGRPC(listener)
	case impl == implBare:
		info, stop, err = runBare(listener)
	default:
		err = fmt.Errorf("unknown client %q", impl)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The client is not stopped at the end: the process exits at once,
	// whatever the client is still busy with (grpc-go's can be busy for
	// minutes), and what it would do to stop is not measured.
	_ = stop
	in := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	defer writeHeapProfile(os.Getenv("LOADTEST_MEMPROFILE"))
	for in.Scan() {
		if in.Text() == "profile" {
			profile()
			continue
		}
		// "probe i" waits for its RPC's answer, "touch i" does not.
		if cmd, arg, ok := strings.Cut(in.Text(), " "); ok && (cmd == "probe" || cmd == "touch") {
			fmt.Fprintf(out, "%s %s\n", cmd, probe(arg, cmd == "probe"))
			if err := out.Flush(); err != nil {
				return 1
			}
			continue
		}
		if in.Text() != "usage" {
			continue
		}
		cpu, rss := selfUsage()
		fmt.Fprintf(out, "usage %d %d %s\n", (cpu - base).Nanoseconds(), rss, info())
		if err := out.Flush(); err != nil {
			return 1
		}
	}
	return 0
}
