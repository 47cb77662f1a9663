package queue

// ReadHashDump is readHashDump, for the external tests of DUMP reads.
func ReadHashDump(p string) (map[string]string, bool) { return readHashDump(p) }

// ReadsByDump says whether TickDue's fast path reads schedules by DUMP.
func (s *Store) ReadsByDump() bool { return s.dumpReads.Load() }
