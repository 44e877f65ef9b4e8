package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// Exit statuses. validate's are the contract a CI job relies on.
const (
	exitOK       = 0
	exitFailed   = 1 // the thing checked is wrong: a NACK, a bad bootstrap, a server that cannot be reached
	exitBadInput = 2 // the command line, or an input file, cannot be used
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// command is one subcommand.
type command struct {
	name    string
	summary string
	// run does the work, printing to out; an error it returns is printed
	// as one line by the caller, with the status of exitCode.
	run func(ctx context.Context, args []string, out io.Writer) error
}

var commands = []command{
	{"bootstrap", "check a bootstrap and print what it means", runBootstrap},
	{"watch", "follow a listener's configuration tree from a management server", runWatch},
	{"validate", "judge resources offline as a goxds client would (ACK or NACK)", runValidate},
	{"csds", "read a running service's xDS state over CSDS", runCSDS},
}

// run is the whole program but for signals and the process's exit, so
// that it reads as the dispatch it is.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitBadInput
	}
	name := args[0]
	if name == "help" || name == "-h" || name == "-help" || name == "--help" {
		usage(stdout)
		return exitOK
	}
	for _, c := range commands {
		if c.name != name {
			continue
		}
		err := c.run(ctx, args[1:], stdout)
		if err == nil {
			return exitOK
		}
		var ee *exitError
		if errors.As(err, &ee) && ee.err == nil {
			return ee.code // reported already
		}
		fmt.Fprintf(stderr, "goxds %s: %s\n", name, oneLine(err.Error()))
		return exitCode(err)
	}
	fmt.Fprintf(stderr, "goxds: unknown command %q (goxds help lists them)\n", name)
	return exitBadInput
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: goxds <command> [flags] [arguments]   (goxds <command> -h for its flags)")
	fmt.Fprintln(w)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
}

// exitError gives an error the exit status it ends the program with; a
// nil err means that what went wrong was printed already.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// badInput marks err as the command line's or an input file's fault.
func badInput(err error) error { return &exitError{code: exitBadInput, err: err} }

func badInputf(format string, args ...any) error { return badInput(fmt.Errorf(format, args...)) }

func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return exitFailed
}

// oneLine joins the lines of a message (errors.Join, parsers' multi-line
// errors) so that every failure is one line of stderr.
func oneLine(msg string) string {
	lines := strings.FieldsFunc(msg, func(r rune) bool { return r == '\n' || r == '\r' })
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, "; ")
}

// parseFlags parses a subcommand's flags. -h prints the flags to out and
// ends the command with status 0; a wrong flag is one line, status 2. The
// flag package's own printing is silenced for that.
func parseFlags(fs *flag.FlagSet, args []string, synopsis string, out io.Writer) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(out, "usage: goxds %s %s\n", fs.Name(), synopsis)
		fs.SetOutput(out)
		fs.PrintDefaults()
		return &exitError{code: exitOK}
	}
	if err != nil {
		return badInputf("%v (goxds %s -h lists the flags)", err, fs.Name())
	}
	return nil
}
