package watchers

import "strings"

// Lines returns the snapshot's tree as WriteTo prints it, a line a node.
func (s *Snapshot) Lines() []string {
	var b strings.Builder
	s.WriteTo(&b) // a strings.Builder does not fail
	return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
}

// DiffLines returns what changed from one printed tree to the next: the
// lines of next not in prev ("+ "), those of prev not in next ("- "), each
// preceded by the lines above it in the tree ("  ") for context, from a
// longest common subsequence of the lines. The lines are a tree indented
// two spaces a level, as Lines (and WriteTo) print a snapshot; nil means
// nothing changed. A tool following a tree prints the first snapshot whole
// and then only this.
func DiffLines(prev, next []string) []string {
	a, b := prev, next
	type op struct {
		kind byte // ' ', '-', '+'
		text string
	}
	// lcs[i][j] is the length of the LCS of a[i:] and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var ops []op
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			ops = append(ops, op{' ', a[i]})
			i, j = i+1, j+1
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			// Removals first, as in a unified diff.
			ops = append(ops, op{'-', a[i]})
			i++
		default:
			ops = append(ops, op{'+', b[j]})
			j++
		}
	}
	// Mark the ancestors of each changed line: the nearest lines above it,
	// on its side of the diff, with less indentation.
	context := make([]bool, len(ops))
	for k, o := range ops {
		if o.kind == ' ' {
			continue
		}
		level := depthOf(o.text)
		for m := k - 1; m >= 0 && level > 0; m-- {
			other := ops[m].kind
			if other != ' ' && other != o.kind {
				continue
			}
			if d := depthOf(ops[m].text); d < level {
				level = d
				if other == ' ' {
					context[m] = true
				}
			}
		}
	}
	var out []string
	for k, o := range ops {
		if o.kind != ' ' || context[k] {
			out = append(out, string(o.kind)+" "+o.text)
		}
	}
	return out
}

// depthOf is the level of a printed line: its indentation.
func depthOf(line string) int {
	n := 0
	for strings.HasPrefix(line[n*len(treeIndent):], treeIndent) {
		n++
	}
	return n
}
