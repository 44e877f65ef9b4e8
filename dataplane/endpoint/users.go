package endpoint

import (
	"maps"
	"slices"
)

// userSet is a set of users that nearly always holds one: an endpoint is
// usually listed by a single cluster, and a Go map for each of tens of
// thousands of endpoints was a fifth of what the balancer kept (~180 B an
// endpoint). The zero value is empty; when one is nil, more is empty.
type userSet struct {
	one  User
	more map[User]struct{}
}

func (s *userSet) add(u User) {
	switch {
	case s.one == nil:
		s.one = u
	case s.one != u:
		if s.more == nil {
			s.more = make(map[User]struct{})
		}
		s.more[u] = struct{}{}
	}
}

func (s *userSet) remove(u User) {
	if s.one != u {
		delete(s.more, u)
		return
	}
	s.one = nil
	for other := range s.more {
		s.one = other
		delete(s.more, other)
		return
	}
}

func (s *userSet) len() int {
	if s.one == nil {
		return 0
	}
	return 1 + len(s.more)
}

// each calls f for every user of s, from a copy when there are several,
// so that f may change s.
func (s *userSet) each(f func(User)) {
	if s.one == nil {
		return
	}
	if len(s.more) == 0 {
		f(s.one)
		return
	}
	for _, u := range append([]User{s.one}, slices.Collect(maps.Keys(s.more))...) {
		f(u)
	}
}
