package asynqwire

import "time"

// KeepLengthsFresh makes the pending lengths s read last count as just
// read (unless it has none), for tests that assert which reads a take
// makes, however slow the machine is between takes (lensMaxAge).
func (s *Set) KeepLengthsFresh() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.lensAt.IsZero() {
		s.lensAt = time.Now()
	}
}
