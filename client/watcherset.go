package client

// watcherSet is the set of named watchers of a cache entry. Almost every
// entry has exactly one (the config tree watches each name once), so that
// one is held inline and a map is made only for a second: at 20,000
// entries the maps were 2.8 MB of the client's heap.
type watcherSet struct {
	one  *watcher              // the only member, when many is nil
	many map[*watcher]struct{} // two or more members; nil otherwise
}

func (s *watcherSet) len() int {
	switch {
	case s.many != nil:
		return len(s.many)
	case s.one != nil:
		return 1
	}
	return 0
}

func (s *watcherSet) has(w *watcher) bool {
	if s.many != nil {
		_, ok := s.many[w]
		return ok
	}
	return w != nil && s.one == w
}

func (s *watcherSet) add(w *watcher) {
	switch {
	case s.many != nil:
		s.many[w] = struct{}{}
	case s.one == nil || s.one == w:
		s.one = w
	default:
		s.many = map[*watcher]struct{}{s.one: {}, w: {}}
		s.one = nil
	}
}

// remove removes w and reports whether it was a member.
func (s *watcherSet) remove(w *watcher) bool {
	if s.many == nil {
		if w == nil || s.one != w {
			return false
		}
		s.one = nil
		return true
	}
	if _, ok := s.many[w]; !ok {
		return false
	}
	delete(s.many, w)
	if len(s.many) == 1 {
		for last := range s.many {
			s.one = last
		}
		s.many = nil
	}
	return true
}

// appendTo appends the members to ws, in no particular order.
func (s *watcherSet) appendTo(ws []*watcher) []*watcher {
	if s.many == nil {
		if s.one != nil {
			ws = append(ws, s.one)
		}
		return ws
	}
	for w := range s.many {
		ws = append(ws, w)
	}
	return ws
}
