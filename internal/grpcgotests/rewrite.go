package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"sort"
	"strconv"
	"strings"
)

// The substitution, name for name. The right-hand names are the shim's
// (testdata/goxds_shim_test.go), each a one-line adapter onto goxds's public
// API with the signature of what it replaces, so the tests' own code, and
// every assertion in it, stays as grpc-go wrote it.
var selectorSubst = map[string]map[string]string{
	// The resolver builder a test makes from bootstrap contents.
	"google.golang.org/grpc/internal": {
		"NewXDSResolverWithConfigForTesting": "goxdsNewXDSResolverWithConfigForTesting",
	},
	// The management server, node ID, bootstrap and resolver most tests
	// start from: the same management server and bootstrap, goxds's Builder.
	"google.golang.org/grpc/internal/testutils/xds/e2e/setup": {
		"ManagementServerAndResolver":           "goxdsManagementServerAndResolver",
		"ManagementServerAndResolverWithSPIFFE": "goxdsManagementServerAndResolverWithSPIFFE",
	},
	// xds.NewGRPCServer and its options become xdsserver's.
	"google.golang.org/grpc/xds": {
		"NewGRPCServer":               "goxdsNewGRPCServer",
		"ServingModeCallback":         "goxdsServingModeCallback",
		"BootstrapContentsForTesting": "goxdsBootstrapContentsForTesting",
		"ClientPoolForTesting":        "goxdsClientPoolForTesting",
	},
}

// importSubst replaces an import path, keeping the name the file uses: goxds's
// xdscreds has the same API as grpc-go's credentials/xds.
var importSubst = map[string]string{
	"google.golang.org/grpc/credentials/xds": "github.com/goxds/xds/grpcxds/xdscreds",
}

// edit replaces src[start:end] with text.
type edit struct {
	start, end int
	text       string
}

// rewriteFile applies the substitution to one test file and returns the new
// source and a count of each substitution made (by the name it replaced).
func rewriteFile(name string, src []byte) ([]byte, map[string]int, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
	if err != nil {
		return nil, nil, err
	}
	off := func(p token.Pos) int { return fset.Position(p).Offset }
	text := func(n ast.Node) string { return string(src[off(n.Pos()):off(n.End())]) }

	// The name each import has in this file.
	pathOf := map[string]string{}
	for _, im := range f.Imports {
		path, _ := strconv.Unquote(im.Path.Value)
		local := path[strings.LastIndex(path, "/")+1:]
		if im.Name != nil {
			local = im.Name.Name
		}
		pathOf[local] = path
	}
	isPkgSel := func(e ast.Expr, path, sel string) bool {
		s, ok := e.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		id, ok := s.X.(*ast.Ident)
		return ok && id.Obj == nil && pathOf[id.Name] == path && s.Sel.Name == sel
	}

	var edits []edit
	counts := map[string]int{}
	var walkErr error
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			// grpc.NewClient(target, opts..., grpc.WithResolvers(r), opts...)
			// becomes goxdsNewClient(target, r, opts...): grpcxds.NewClient
			// with the Builder r (grpc.NewClient unchanged if r is not one).
			if !isPkgSel(n.Fun, "google.golang.org/grpc", "NewClient") || len(n.Args) < 2 {
				return true
			}
			var resolverArg ast.Expr
			var rest []string
			for _, a := range n.Args[1:] {
				if c, ok := a.(*ast.CallExpr); ok && isPkgSel(c.Fun, "google.golang.org/grpc", "WithResolvers") {
					if len(c.Args) != 1 || resolverArg != nil {
						walkErr = fmt.Errorf("%s: grpc.WithResolvers with other than one resolver", fset.Position(c.Pos()))
						return false
					}
					resolverArg = c.Args[0]
					continue
				}
				rest = append(rest, text(a))
			}
			if resolverArg == nil {
				return true // a channel to a server's address, not an xDS target
			}
			args := append([]string{text(n.Args[0]), text(resolverArg)}, rest...)
			ell := ""
			if n.Ellipsis.IsValid() {
				ell = "..."
			}
			edits = append(edits, edit{off(n.Pos()), off(n.End()), "goxdsNewClient(" + strings.Join(args, ", ") + ell + ")"})
			counts["grpc.NewClient(…, grpc.WithResolvers(r), …)"]++
			return false // the arguments were copied as written
		case *ast.SelectorExpr:
			id, ok := n.X.(*ast.Ident)
			if !ok || id.Obj != nil {
				return true
			}
			if to, ok := selectorSubst[pathOf[id.Name]][n.Sel.Name]; ok {
				edits = append(edits, edit{off(n.Pos()), off(n.End()), to})
				counts[id.Name+"."+n.Sel.Name]++
			}
		}
		return true
	})
	if walkErr != nil {
		return nil, nil, walkErr
	}
	for _, im := range f.Imports {
		path, _ := strconv.Unquote(im.Path.Value)
		if to, ok := importSubst[path]; ok {
			name := path[strings.LastIndex(path, "/")+1:]
			if im.Name != nil {
				name = im.Name.Name
			}
			// Keep the file's name for the package.
			edits = append(edits, edit{off(im.Pos()), off(im.End()), name + " " + strconv.Quote(to)})
			counts["import "+path]++
		}
	}
	out := applyEdits(src, edits)
	out, err = dropUnusedImports(name, out)
	if err != nil {
		return nil, nil, err
	}
	return out, counts, nil
}

func applyEdits(src []byte, edits []edit) []byte {
	sort.Slice(edits, func(i, j int) bool { return edits[i].start > edits[j].start })
	out := append([]byte(nil), src...)
	for _, e := range edits {
		out = append(out[:e.start:e.start], append([]byte(e.text), out[e.end:]...)...)
	}
	return out
}

// dropUnusedImports removes the imports the substitution left unused (a
// file whose only use of setup was ManagementServerAndResolver), and formats.
func dropUnusedImports(name string, src []byte) ([]byte, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
	if err != nil {
		return nil, fmt.Errorf("rewritten %s does not parse: %w", name, err)
	}
	used := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if s, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := s.X.(*ast.Ident); ok && id.Obj == nil {
				used[id.Name] = true
			}
		}
		return true
	})
	var edits []edit
	for _, im := range f.Imports {
		path, _ := strconv.Unquote(im.Path.Value)
		local := path[strings.LastIndex(path, "/")+1:]
		if im.Name != nil {
			local = im.Name.Name
		}
		if local == "_" || local == "." || used[local] {
			continue
		}
		edits = append(edits, edit{fset.Position(im.Pos()).Offset, fset.Position(im.End()).Offset, ""})
	}
	out := applyEdits(src, edits)
	formatted, err := format.Source(out)
	if err != nil {
		return nil, fmt.Errorf("rewritten %s: %w", name, err)
	}
	return bytes.TrimLeft(formatted, "\n"), nil
}
