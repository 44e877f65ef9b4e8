package main

import (
	"fmt"
	"sort"
	"strings"
)

// markdown is the run's report: the substitution's counts, the counts of
// passing tests by side, and each failing test with its last lines from the
// test itself and the reason known for it (known.go).
func markdown(version string, subst map[string]int, results []result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## grpc-go %s's xDS tests on goxds\n\n", version)
	var keys []string
	for k := range subst {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b.WriteString("Substituted:")
	for _, k := range keys {
		fmt.Fprintf(&b, " `%s` ×%d;", k, subst[k])
	}
	b.WriteString("\n\n")
	type count struct{ pass, total, expected int }
	counts := map[string]*count{"client": {}, "server": {}}
	for _, r := range results {
		c := counts[r.side()]
		c.total++
		if r.pass {
			c.pass++
		} else if _, ok := known[r.pkg+":"+r.name]; ok {
			c.expected++
		}
	}
	for _, side := range []string{"client", "server"} {
		c := counts[side]
		fmt.Fprintf(&b, "- %s: %d of %d pass; of the %d failing, %d have a known reason (below), %d not\n",
			side, c.pass, c.total, c.total-c.pass, c.expected, c.total-c.pass-c.expected)
	}
	b.WriteString("\n| test | side | reason | what it says |\n|---|---|---|---|\n")
	sort.Slice(results, func(i, j int) bool {
		if results[i].side() != results[j].side() {
			return results[i].side() < results[j].side()
		}
		return results[i].pkg+results[i].name < results[j].pkg+results[j].name
	})
	for _, r := range results {
		if r.pass {
			continue
		}
		reason, ok := known[r.pkg+":"+r.name]
		if !ok {
			reason = "**not classified**"
		}
		said := ""
		if r.timedOut {
			said = "timed out; "
		}
		if n := len(r.failures); n > 0 {
			said += r.failures[n-1]
		}
		said = strings.ReplaceAll(said, "|", "\\|")
		if len(said) > 300 {
			said = said[:300] + "…"
		}
		fmt.Fprintf(&b, "| %s:%s | %s | %s | %s |\n", r.pkg, r.name, r.side(), reason, said)
	}
	return b.String()
}
