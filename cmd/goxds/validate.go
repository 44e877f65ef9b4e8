package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/resources"
)

const validateSynopsis = "[-bootstrap file] [-type t] [-json] [-q] [-v] file...   (\"-\" reads the standard input)"

// validateTimeout bounds the judging of one file. It takes milliseconds;
// the bound is there so that a fault never hangs a CI job.
const validateTimeout = 30 * time.Second

func runValidate(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	bootstrapPath := fs.String("bootstrap", "", "bootstrap `file` whose rules apply (servers' features, authorities, certificate providers); default: a minimal one")
	typeName := fs.String("type", "", "each file is one bare resource of this `type`: listener, route, cluster, endpoints (or lds, rds, cds, eds, a type name or URL)")
	asJSON := fs.Bool("json", false, "print one JSON object per file")
	verbose := fs.Bool("v", false, "log the client's debug output to stderr")
	quiet := fs.Bool("q", false, "print only the resources that are not accepted, and the NACKs (for large files)")
	if err := parseFlags(fs, args, validateSynopsis, out); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return badInputf("no files to validate (goxds validate -h for help)")
	}
	typeURL := ""
	if *typeName != "" {
		var err error
		if typeURL, err = typeFromFlag(*typeName); err != nil {
			return badInput(err)
		}
	}
	var cfg *bootstrap.Config
	if *bootstrapPath != "" {
		var err error
		if cfg, err = bootstrap.Load(*bootstrapPath); err != nil {
			return badInput(err)
		}
	}
	logger := slog.New(slog.DiscardHandler)
	if *verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	// Every file is read before any is judged: a file that cannot be read
	// is a mistake in the command, reported alone, not among verdicts.
	var reports []*fileReport
	for _, path := range fs.Args() {
		data, err := readPath(path)
		if err != nil {
			return badInput(err)
		}
		resp, format, err := readInput(path, data, typeURL)
		if err != nil {
			return badInputf("%s: %v", path, err)
		}
		typ, ok := resources.Lookup(resp.GetTypeUrl())
		if !ok {
			return badInputf("%s: resources of type %s are not a type goxds decodes", path, resp.GetTypeUrl())
		}
		fcfg := cfg
		if fcfg == nil {
			if fcfg, err = minimalBootstrap(typ, resp); err != nil {
				return badInputf("%s: %v", path, err)
			}
		}
		jctx, cancel := context.WithTimeout(ctx, validateTimeout)
		j, err := judge(jctx, fcfg, typ, resp, logger)
		cancel()
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		reports = append(reports, &fileReport{Path: path, Format: format, TypeURL: typ.TypeURL(), typeName: typ.TypeName(), Version: resp.GetVersionInfo(), j: j})
	}
	failed := false
	for _, r := range reports {
		failed = failed || !r.allAccepted()
		if *asJSON {
			if err := printJSONLine(out, r.toJSON()); err != nil {
				return err
			}
			continue
		}
		r.print(out, *quiet)
	}
	if failed {
		return &exitError{code: exitFailed}
	}
	return nil
}

func readPath(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(path)
}

// fileReport is validate's report of one file.
type fileReport struct {
	Path, Format, TypeURL, typeName, Version string
	j                                        *judgement
}

func (r *fileReport) allAccepted() bool {
	for _, v := range r.j.Resources {
		if v.Verdict != verdictAccepted {
			return false
		}
	}
	return len(r.j.NACKs) == 0
}

// print writes the report as text; quiet leaves out accepted resources.
func (r *fileReport) print(w io.Writer, quiet bool) {
	version := ""
	if r.Version != "" {
		version = fmt.Sprintf(", version %q", r.Version)
	}
	fmt.Fprintf(w, "%s: %d %s resource(s) in %s%s\n", r.Path, r.j.Count, r.typeName, r.Format, version)
	for _, v := range r.j.Resources {
		name := fmt.Sprintf("%q", v.Name)
		if v.Name == "" {
			name = fmt.Sprintf("#%d", v.Index)
		}
		switch {
		case v.Verdict == verdictAccepted && quiet:
		case v.Verdict == verdictAccepted:
			fmt.Fprintf(w, "  %-8s %s: %s\n", v.Verdict, name, describe(v.Value))
		case v.Err != nil:
			fmt.Fprintf(w, "  %-8s %s: %s\n", v.Verdict, name, oneLine(v.Err.Error()))
		default:
			fmt.Fprintf(w, "  %-8s %s\n", v.Verdict, name)
		}
	}
	switch len(r.j.NACKs) {
	case 0:
		if r.j.Judged {
			fmt.Fprintln(w, "  the response is ACKed")
		}
	case 1:
		fmt.Fprintf(w, "  the response is NACKed; error_detail: %s\n", r.j.NACKs[0].ErrorDetail)
	default:
		for _, n := range r.j.NACKs {
			fmt.Fprintf(w, "  the response is NACKed by the client of %s; error_detail: %s\n", n.Server, n.ErrorDetail)
		}
	}
}

// fileJSON is the -json form of a file's report.
type fileJSON struct {
	File      string         `json:"file"`
	Format    string         `json:"format"`
	TypeURL   string         `json:"type_url"`
	Version   string         `json:"version_info,omitempty"`
	Accepted  bool           `json:"accepted"`
	Resources []resourceJSON `json:"resources"`
	NACKs     []nackJSON     `json:"nacks,omitempty"`
}

type resourceJSON struct {
	Index   int    `json:"index"`
	Name    string `json:"name,omitempty"`
	Verdict string `json:"verdict"`
	Error   string `json:"error,omitempty"`
	// Value is the decoded value, as the text report prints it.
	Value string `json:"value,omitempty"`
}

type nackJSON struct {
	Server      string `json:"server"`
	ErrorDetail string `json:"error_detail"`
}

func (r *fileReport) toJSON() fileJSON {
	out := fileJSON{File: r.Path, Format: r.Format, TypeURL: r.TypeURL, Version: r.Version, Accepted: r.allAccepted(), Resources: []resourceJSON{}}
	for _, v := range r.j.Resources {
		rj := resourceJSON{Index: v.Index, Name: v.Name, Verdict: v.Verdict}
		if v.Err != nil {
			rj.Error = v.Err.Error()
		}
		if v.Value != nil {
			rj.Value = describe(v.Value)
		}
		out.Resources = append(out.Resources, rj)
	}
	for _, n := range r.j.NACKs {
		out.NACKs = append(out.NACKs, nackJSON(n))
	}
	return out
}

func printJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// minimalBootstrap is the bootstrap validate judges with when given none:
// one server that is never dialled, and an authority for each xdstp://
// name in resp, so that such names can be watched. Rules that depend on
// the bootstrap (certificate providers, server features) then see none.
func minimalBootstrap(typ resources.AnyType, resp *discoveryv3.DiscoveryResponse) (*bootstrap.Config, error) {
	cfg := &bootstrap.Config{
		Servers: []bootstrap.ServerConfig{{
			ServerURI:    "goxds-validate.invalid:443",
			ChannelCreds: []bootstrap.ChannelCreds{{Type: bootstrap.CredsInsecure}},
		}},
		Node: bootstrap.Node{ID: "goxds-validate"},
	}
	for _, a := range resp.GetResources() {
		name, _ := resourceName(typ, a)
		if rest, ok := strings.CutPrefix(name, "xdstp://"); ok {
			authority, _, _ := strings.Cut(rest, "/")
			if cfg.Authorities == nil {
				cfg.Authorities = make(map[string]bootstrap.Authority)
			}
			cfg.Authorities[authority] = bootstrap.Authority{}
		}
	}
	return cfg, cfg.Validate()
}
