package client

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// nackError turns the errors of a response into the NACK's error_detail:
// the first errors whole, as many as fit in maxNACKBytes, then how many
// more there were. An error too long to fit even first is cut, at a rune
// boundary.
func nackError(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		if msg := errs[0].Error(); len(msg) > maxNACKBytes {
			return errors.New(truncateUTF8(msg, maxNACKBytes-len(cutMark)) + cutMark)
		}
		return errs[0]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d errors: ", len(errs))
	// room keeps space for the longest possible tail.
	room := maxNACKBytes - len(fmt.Sprintf("; and %d more errors", len(errs)))
	for i, err := range errs {
		msg := err.Error()
		sep := "; "
		if i == 0 {
			sep = ""
		}
		if b.Len()+len(sep)+len(msg) > room {
			if i == 0 {
				// Not even the first fits: cut it, so that the NACK
				// still says what was wrong first.
				b.WriteString(truncateUTF8(msg, room-b.Len()-len(cutMark)))
				b.WriteString(cutMark)
				i++
			}
			if more := len(errs) - i; more == 1 {
				b.WriteString("; and 1 more error")
			} else {
				fmt.Fprintf(&b, "; and %d more errors", more)
			}
			break
		}
		b.WriteString(sep)
		b.WriteString(msg)
	}
	return errors.New(b.String())
}

// cutMark ends an error message cut short.
const cutMark = "… (cut)"

// truncateUTF8 returns the longest prefix of s of at most n bytes that does
// not split a rune.
func truncateUTF8(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
