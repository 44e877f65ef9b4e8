// Package importcheck holds only a test: it checks that goxds packages import
// one another in the direction docs/ARCHITECTURE.md describes, so a shortcut
// across layers fails CI instead of slowly eroding the design.
package importcheck
