package scenarios

import "sync"

// ReplicaMemory is memory-set's "processing" set: it lives in one replica
// and is correctly locked inside it — which is the point of the scenario,
// since nothing locks it across replicas. The zero value is ready to use; a
// replica that restarts (a deploy) gets a fresh one.
type ReplicaMemory struct {
	mu   sync.Mutex
	seen map[string]bool
}

// Claim marks key as processing and reports whether this call was the first
// to do so in this replica.
func (m *ReplicaMemory) Claim(key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen[key] {
		return false
	}
	if m.seen == nil {
		m.seen = map[string]bool{}
	}
	m.seen[key] = true
	return true
}
